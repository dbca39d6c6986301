"""Fixtures shared by the daemon tests."""

from tests.daemons.game_harness import make_server  # noqa: F401 - a fixture: pytest finds it here by name
