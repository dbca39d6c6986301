"""A refused request is answered with its own id wherever its header is readable, and the reply says what is wrong."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from tandem.daemons.config import load_config
from tandem.daemons.learner.snapshots import serve_snapshots
from tandem.daemons.main import DaemonSpec
from tandem.daemons.supervisor.loop import handle_control
from tandem.daemons.supervisor.status import status_data
from tandem.daemons.supervisor.supervisor import Supervisor
from tandem.protocol import ControlReply, ProtocolError, decode, sockets
from tandem.protocol.control import reply_address

ROOT = Path(__file__).resolve().parents[2]
WAIT_MS = 2000
STATUS = {"kind": "control_request", "command": "status", "args": {}}
BAD = {  # what is wrong -> (the header, the id its refusal carries, what the refusal says)
    "protocol version 2": ({**STATUS, "v": 2, "request_id": 41}, 41, "v: protocol version 2 is not supported"),
    "v the string '1'": ({**STATUS, "v": "1", "request_id": 42}, 42, "v: must be an integer (the protocol version, 1)"),
    "no v": ({**STATUS, "request_id": 43}, 43, "v: required field is missing"),
    "an unknown kind": ({**STATUS, "v": 1, "kind": "control_requets", "request_id": 44}, 44, "kind: unknown kind"),
    "a kind that is no string": ({**STATUS, "v": 1, "kind": 7, "request_id": 45}, 45, "kind: unknown kind 7"),
    "args not a map": ({**STATUS, "v": 1, "args": [], "request_id": 46}, 46, "args: must be a map"),
    "a request_id that is a bool": ({**STATUS, "v": 2, "request_id": True}, 0, "v: protocol version 2"),
    "a negative request_id": ({**STATUS, "v": 2, "request_id": -3}, 0, "v: protocol version 2"),
}


def frames(header: dict) -> list[bytes]:
    return [msgpack.packb(header, use_bin_type=True)]


@pytest.mark.parametrize("what", list(BAD))
def test_the_refusal_address_reads_the_id_whatever_else_is_wrong(what):
    header, request_id, says = BAD[what]
    with pytest.raises(ProtocolError) as refused:
        decode(frames(header))
    assert str(refused.value).startswith(says)
    kind = header.get("kind") if isinstance(header.get("kind"), str) else ""
    assert reply_address(frames(header)) == (kind, request_id)


def test_a_header_that_is_not_a_map_has_no_id_to_echo():
    assert reply_address([b"\xc1"]) == ("", 0)
    assert reply_address([msgpack.packb([1, {"request_id": 5}])]) == ("", 0)


def test_a_string_version_is_refused_as_not_an_integer_not_as_another_version():
    with pytest.raises(ProtocolError, match="must be an integer") as refused:
        decode(frames({**STATUS, "v": "1", "request_id": 1}))
    assert "not supported" not in str(refused.value)
    with pytest.raises(ProtocolError, match="must be an integer .* got bool True"):
        decode(frames({**STATUS, "v": True, "request_id": 1}))


def test_a_long_unknown_kind_is_cut_in_the_refusal():
    with pytest.raises(ProtocolError) as refused:
        decode(frames({**STATUS, "v": 1, "kind": "x" * 100_000, "request_id": 1}))
    assert len(str(refused.value)) < 1000


def exchange(router, dealer, message: list[bytes], serve) -> ControlReply:
    """Send `message`, let `serve(router)` answer what waits, and return the reply (within bounded waits)."""
    assert sockets.send_frames(dealer, message, timeout_ms=WAIT_MS)
    assert sockets.poll([router], WAIT_MS), "the message never arrived"
    serve(router)
    reply = sockets.recv_frames(dealer, WAIT_MS)
    assert reply is not None, "no reply"
    return decode(reply)


@pytest.mark.parametrize("what", list(BAD))
def test_the_supervisor_answers_a_malformed_request_with_its_own_id(tmp_path, control_pair, what):
    config = load_config(ROOT / "examples" / "cartpole.toml", [])
    sup = Supervisor(
        config, tmp_path / "config.toml", "tcp://127.0.0.1:1", tmp_path / "logs", [DaemonSpec("actor", "x")]
    )
    header, request_id, says = BAD[what]
    reply = exchange(*control_pair, frames(header), lambda router: handle_control(router, sup, 0.0))
    assert isinstance(reply, ControlReply)
    assert (reply.ok, reply.code, reply.request_id) == (False, "bad_message", request_id)
    assert reply.message.startswith(says)
    assert status_data(sup, 0.0)["dropped"]["control_malformed"] == 1


def test_a_learner_snapshot_socket_answers_a_request_of_another_version_with_its_id(control_pair):
    counts = {"snapshot_requests_refused": 0}
    request = {"v": 2, "kind": "weight_request", "policy_id": "default", "have_version": -1, "requester": "a"}
    reply = exchange(
        *control_pair,
        frames({**request, "request_id": 77}),
        lambda router: serve_snapshots(router, "default", 3, None, counts),
    )
    assert (reply.ok, reply.code, reply.request_id) == (False, "bad_message", 77)
    assert counts["snapshot_requests_refused"] == 1
