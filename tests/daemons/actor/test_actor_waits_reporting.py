"""An actor waiting for its learner's first weights goes on heartbeating (its stage wait_weights shows, and its
longer deadline holds): what it built is held before the wait, for its reports to read."""

from __future__ import annotations

from tandem.daemons.actor.daemon import Actor
from tandem.daemons.config import load_config
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import sockets
from tests.daemons.conftest import EXAMPLES


def test_an_actor_heartbeats_while_it_waits_for_its_first_weights(tmp_path, monkeypatch):
    actor = Actor(load_config(EXAMPLES / "cartpole.toml", [f"run.dir='{tmp_path}'"]), 0, StopFlag(), None)
    ticks: list[object] = []
    seen: list[object] = []

    def wait_weights(report) -> None:  # the links' wait, reporting as it does between its polls
        seen.append(actor.stepping)
        before = len(ticks)
        report()
        report()
        seen.append(len(ticks) - before)

    monkeypatch.setattr(actor.runtime.reporter, "tick", lambda *args: ticks.append(args))
    monkeypatch.setattr(actor.links, "connect", lambda spaces: None)
    monkeypatch.setattr(actor.links, "wait_weights", wait_weights)
    try:
        built = actor.start()
        assert seen == [built, 2] and built is actor.stepping  # each report during the wait ticked the reporter
    finally:
        if actor.stepping is not None:
            actor.stepping.close()
        sockets.close_context(actor.runtime.ctx, 0)
