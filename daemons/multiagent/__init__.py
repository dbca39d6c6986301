"""Multi-agent worlds: PettingZoo AEC and parallel environments, one learner per policy."""
