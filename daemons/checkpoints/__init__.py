"""Checkpoint files on disk: written atomically by learners, read by the evaluator, `tandem eval` and the
Python API (every reader loads them with `torch.load(weights_only=True)`; nothing from a socket)."""
