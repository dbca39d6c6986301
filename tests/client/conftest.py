"""Fixtures of the client tests: an action server in the test process (the daemons tests' harness)."""

from tests.daemons.game_harness import make_server  # noqa: F401 - a fixture: pytest finds it here by name
