"""A supervisor without children (`tandem supervise --no-children`) watches daemons others started; explicit clock."""

from __future__ import annotations

from tandem.daemons.supervisor.status import state_summary, status_data
from tandem.daemons.supervisor.supervisor import Supervisor
from tandem.protocol import ControlRequest
from tests.daemons.supervisor.builders import beat, supervisor


def make(tmp_path) -> Supervisor:
    overrides = ("supervisor.liveness_timeout_s=3.0", "supervisor.max_concurrent_starts=1")
    return supervisor(tmp_path, *overrides, specs=[], adopt=True)


def rows(sup: Supervisor, now: float) -> dict:
    return {r["name"]: r for r in status_data(sup, now)["processes"]}


def test_daemons_that_heartbeat_are_watched_and_lost_when_silent(tmp_path):
    sup = make(tmp_path)
    sup.heartbeat(beat("actor-0", "running", env_steps=0), now=0.0)
    sup.heartbeat(beat("actor-0", "running", env_steps=500), now=1.0)
    sup.heartbeat(beat("learner-default", "running", updates=10), now=1.0)
    r = rows(sup, 2.0)
    assert r["actor-0"]["state"] == "REMOTE" and r["actor-0"]["rate_per_s"] == 500.0
    assert [p["learner"] for p in status_data(sup, 2.0)["policies"]] == ["learner-default"]  # actors are no policy
    sup.step(4.5)
    data = status_data(sup, 4.5)
    assert {r["name"]: r["state"] for r in data["processes"]} == {
        "actor-0": "REMOTE-LOST",
        "learner-default": "REMOTE-LOST",
    }
    assert sorted(data["unhealthy"]) == ["actor-0", "learner-default"]
    sup.heartbeat(beat("actor-0", "running", pid=101, incarnation=2, env_steps=0), now=5.0)  # restarted by systemd
    assert rows(sup, 5.0)["actor-0"]["state"] == "REMOTE" and rows(sup, 5.0)["actor-0"]["pid"] == 101


def test_start_token_of_a_builder_that_went_silent_is_given_back(tmp_path):
    sup = make(tmp_path)
    sup.heartbeat(beat("actor-0", "wait_start_token"), now=0.0)
    assert sup.handle(ControlRequest(1, "start_token", {"name": "actor-0"}), 0.0).data["granted"]
    assert not sup.handle(ControlRequest(2, "start_token", {"name": "actor-1"}), 0.1).data["granted"]
    sup.step(5.0)  # actor-0 silent for longer than the liveness timeout
    assert sup.handle(ControlRequest(3, "start_token", {"name": "actor-1"}), 5.0).data["granted"]


def test_restart_and_stop_say_the_daemons_are_not_ours(tmp_path):
    sup = make(tmp_path)
    sup.heartbeat(beat("actor-0", "running"), now=0.0)
    reply = sup.handle(ControlRequest(1, "restart", {"name": "actor-0"}), 0.0)
    assert not reply.ok and reply.code == "not_managed" and "systemctl" in reply.message
    reply = sup.handle(ControlRequest(2, "stop", {}), 0.0)
    assert reply.ok and "keep running" in reply.message and sup.stopping


def test_state_summary_for_systemd_status(tmp_path):
    sup = make(tmp_path)
    assert state_summary(sup, 0.0) == "supervising: no daemons yet"
    sup.heartbeat(beat("actor-0", "running"), now=0.0)
    sup.heartbeat(beat("actor-1", "running"), now=2.0)
    assert state_summary(sup, 4.0) == "supervising: 1 REMOTE, 1 REMOTE-LOST"
