"""The learner daemon of one policy: intake, replay, training, publishing, checkpoints."""
