"""The action server: an actor mode in which games that run their own loop ask for actions (issue 14)."""
