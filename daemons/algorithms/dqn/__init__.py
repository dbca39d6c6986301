"""Double DQN: its spec and [algorithm] section (spec.py, no torch) and its learner and policy (learner.py)."""
