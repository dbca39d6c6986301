"""Fixtures shared by the daemon tests."""

import sys
from pathlib import Path

import pytest

from tandem.daemons.learner.daemon import Learner
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import sockets
from tests.daemons.game_harness import make_server  # noqa: F401 - a fixture: pytest finds it here by name


@pytest.fixture
def built_learner():
    """build(config) -> a Learner of policy 'default', built and bound to free loopback ports; closed afterwards."""
    made = []

    def build(config) -> Learner:
        learner = Learner(config, "default", StopFlag(), control_endpoint=None)
        learner.build()
        learner.binding.bind()
        made.append(learner)
        return learner

    yield build
    for learner in made:
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples_on_path(monkeypatch):
    """The examples' folder on the import path, as `tandem up` puts a config's folder there; the modules imported
    from it are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield EXAMPLES
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(EXAMPLES)):
            sys.modules.pop(name, None)
