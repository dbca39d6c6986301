"""The control socket answers bad input with the request's own id, counts it, and lends no slot to strangers."""

from __future__ import annotations

import msgpack
import pytest

from tandem.daemons.main import DaemonSpec
from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.loop import handle_control
from tandem.daemons.supervisor.status import status_data
from tandem.daemons.supervisor.supervisor import Supervisor
from tandem.protocol import ControlReply, ControlRequest, WeightRequest, decode, sockets
from tandem.protocol.limits import PROTOCOL_VERSION
from tests.daemons.supervisor.builders import beat, supervisor

WAIT_MS = 2000


def make(tmp_path) -> Supervisor:
    specs = [DaemonSpec("actor", "x.toml", index=0), DaemonSpec("learner", "x.toml")]
    return supervisor(tmp_path, "supervisor.max_concurrent_starts=1", specs=specs)


def granted(sup: Supervisor, name: str, now: float) -> bool:
    """Whether `name` holds a start token after asking for one at `now`."""
    return sup.handle(ControlRequest(1, "start_token", {"name": name}), now).data["granted"]


def test_start_token_needs_a_name_the_supervisor_knows(tmp_path):
    sup = make(tmp_path)
    nameless = sup.handle(ControlRequest(4, "start_token", {}), 0.0)
    stranger = sup.handle(ControlRequest(5, "start_token", {"name": "actor-99"}), 0.0)
    assert (nameless.ok, nameless.code, nameless.request_id) == (False, "bad_args", 4)
    assert (stranger.ok, stranger.code) == (False, "unknown_process")
    assert sup.tokens.holders == set()  # neither took the one slot
    assert granted(sup, "actor-0", 0.0)


def test_heartbeats_from_daemons_it_did_not_start_are_counted(tmp_path):
    sup = make(tmp_path)
    sup.heartbeat(beat("actor-7", pid=1), 0.0)
    assert status_data(sup, 0.0)["dropped"]["heartbeats_unknown"] == 1
    assert "actor-7" not in {r["name"] for r in status_data(sup, 0.0)["processes"]}


@pytest.fixture
def control(tmp_path, zmq_ctx):
    """The supervisor's control ROUTER, and a DEALER connected to it."""
    endpoint = f"ipc://{tmp_path}/control"
    return sockets.control_router(zmq_ctx, endpoint), sockets.control_dealer(zmq_ctx, endpoint)


def exchange(sup, router, dealer, frames) -> ControlReply | None:
    """Send raw frames, let the supervisor handle them, and return its reply (None when none came)."""
    assert sockets.send_frames(dealer, frames, timeout_ms=WAIT_MS)
    assert sockets.poll([router], WAIT_MS), "the control socket never received the message"
    handle_control(router, sup, 0.0)
    reply = sockets.recv_frames(dealer, 200)
    return None if reply is None else decode(reply)


def header(**fields) -> bytes:
    return msgpack.packb({"v": PROTOCOL_VERSION, **fields})


def test_a_bad_request_is_answered_with_its_own_id(tmp_path, control):
    sup = make(tmp_path)
    reply = exchange(sup, *control, [header(kind="control_request", request_id=41, command="status", args=7)])
    assert isinstance(reply, ControlReply) and (reply.ok, reply.code, reply.request_id) == (False, "bad_message", 41)
    assert status_data(sup, 0.0)["dropped"]["control_malformed"] == 1


def test_a_malformed_heartbeat_is_counted_but_gets_no_reply(tmp_path, control):
    sup = make(tmp_path)
    assert exchange(sup, *control, [header(kind="heartbeat", name="actor-0", pid="not a pid")]) is None
    assert status_data(sup, 0.0)["dropped"]["control_malformed"] == 1


def test_a_message_of_another_kind_is_counted_and_answered(tmp_path, control):
    sup = make(tmp_path)
    reply = exchange(sup, *control, WeightRequest("default", -1, "x").to_frames())
    assert isinstance(reply, ControlReply) and (reply.ok, reply.code) == (False, "bad_kind")
    assert status_data(sup, 0.0)["dropped"]["control_malformed"] == 1


def one_builds(sup: Supervisor) -> None:
    """actor-0 and actor-1 started at 0 s; actor-0 builds its envs from 1 s, with the one start token."""
    for name, pid in (("actor-0", 10), ("actor-1", 11)):
        states.started(sup.processes[name].record, pid, 0.0)
    sup.heartbeat(beat("actor-0", "build_env 1/8", pid=10), 1.0)
    assert granted(sup, "actor-0", 1.0)


def test_a_builder_stuck_in_one_stage_lends_its_start_token_on(tmp_path):
    sup = make(tmp_path)  # max_concurrent_starts = 1, start_token_lease_s = 30
    sup.add(DaemonSpec("actor", "x.toml", index=1))
    one_builds(sup)
    assert not granted(sup, "actor-1", 2.0)
    sup.step(20.0)  # building for 19 s: still its token
    assert not granted(sup, "actor-1", 20.0)
    sup.step(31.5)  # stuck past the lease
    assert granted(sup, "actor-1", 31.5)


def test_a_lease_longer_than_the_build_deadline_still_fires_before_it(tmp_path):
    """start_token_lease_s 30 with build_env_deadline_s 15: the token moves on after 7.5 s, not after the kill."""
    overrides = (
        "supervisor.max_concurrent_starts=1",
        "supervisor.build_env_deadline_s=15",
        "supervisor.start_token_lease_s=30",
    )
    sup = supervisor(tmp_path, *overrides, specs=[DaemonSpec("actor", "x.toml", index=i) for i in (0, 1)])
    one_builds(sup)
    sup.step(8.0)  # 7 s in the stage: still its token
    assert not granted(sup, "actor-1", 8.0)
    sup.step(9.0)  # past half the deadline, long before the 16 s it would take to be killed
    assert granted(sup, "actor-1", 9.0)
