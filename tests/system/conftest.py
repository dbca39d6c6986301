"""Fixtures for tests that run real daemons: every process and socket they start is ended afterwards."""

from __future__ import annotations

import pytest

from tests.system.harness import Collector, Procs


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path / "logs")
    yield p
    p.stop_all()
