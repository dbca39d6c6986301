"""A daemon's way out through its runtime: in order, every step whatever the others did, the last heartbeats say why."""

from __future__ import annotations

import pytest

from tandem.daemons.config import config_from_dict
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import Heartbeat, decode, sockets

WAIT_MS = 3000


@pytest.fixture
def supervisor(zmq_ctx, short_tmp):
    """A control ROUTER standing in for the supervisor: `beats()` reads the heartbeats that came."""
    router = sockets.control_router(zmq_ctx, f"ipc://{short_tmp}/control")

    def beats() -> list[Heartbeat]:
        got = []
        while (frames := sockets.recv_frames(router, WAIT_MS if not got else 200)) is not None:
            message = decode(frames[1:])
            if isinstance(message, Heartbeat):
                got.append(message)
        return got

    beats.endpoint = sockets.bound_endpoint(router)
    return beats


def runtime(endpoint: str | None = None) -> DaemonRuntime:
    return DaemonRuntime("learner", "learner-default", config_from_dict({}), endpoint, StopFlag())


def test_the_way_out_goes_in_order_and_closes_the_context():
    rt, order = runtime(), []
    rt.on_close(lambda: order.append("links"))
    rt.on_stop(lambda: order.append(f"checkpoint in {rt.reporter.stage}"))
    rt.on_close(lambda: order.append("envs"))  # made after the links: closed before them
    assert rt.run(lambda: order.append("main"), last_report=lambda: order.append(f"report in {rt.reporter.stage}")) == 0
    assert order == ["main", "checkpoint in start", "report in stopping", "envs", "links"]
    assert rt.ctx.closed


def test_a_step_that_fails_on_the_way_out_stops_none_of_the_others_and_is_raised_after_them():
    rt, closed = runtime(), []
    rt.on_close(lambda: closed.append("first"))
    rt.on_close(lambda: 1 / 0)
    rt.on_close(lambda: closed.append("last"))
    with pytest.raises(ZeroDivisionError):
        rt.run(lambda: None)
    assert closed == ["last", "first"] and rt.ctx.closed


def test_the_error_that_ended_main_wins_over_one_on_the_way_out(caplog):
    def main():
        raise ValueError("no such env")

    rt = runtime()
    rt.on_close(lambda: 1 / 0)
    with pytest.raises(ValueError, match="no such env"):
        rt.run(main)
    assert rt.ctx.closed and "ZeroDivisionError" in caplog.text  # logged, not lost


def test_the_last_heartbeats_carry_the_stages_of_the_way_out_and_the_error(supervisor):
    rt = runtime(supervisor.endpoint)
    rt.on_stop(lambda: rt.reporter.set_stage("checkpoint"))

    def main():
        rt.reporter.set_stage("running")
        rt.reporter.tick()
        raise RuntimeError("the intake thread died")

    with pytest.raises(RuntimeError):
        rt.run(main)
    beats = supervisor()
    assert beats[0].stage == "running" and not beats[0].error
    # after a failure the stage it failed in stays, so status shows where it broke
    assert {b.stage for b in beats[1:]} == {"running"}
    assert beats[-1].error == "the intake thread died"


def test_report_now_sends_a_heartbeat_before_the_interval_is_up(supervisor):
    rt = runtime(supervisor.endpoint)
    try:
        assert rt.reporter.tick()  # the first one goes at once
        assert not rt.reporter.tick()  # the next only after heartbeat_interval_s ...
        assert rt.reporter.report_now()  # ... unless asked for now
        assert len(supervisor()) == 2
    finally:
        rt.close(lambda: None)
