"""The Python API for trained policies (load, play, export), re-exported as `from tandem import load_policy, ...`."""
