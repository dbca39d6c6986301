"""protocol/test_vectors.json, the byte-level examples PROTOCOL.md offers other implementations, holds for this one."""

from __future__ import annotations

import json

import pytest

from tandem.protocol import ProtocolError, WeightBlob, decode
from tandem.protocol.control import reply_address
from tests.protocol.vectors import PATH, vectors

CHECKED_IN = json.loads(PATH.read_text())["vectors"]


def outcome(frames: list[bytes]) -> tuple[str, str]:
    """('ok', kind) or ('rejected', field), as a receiver would act on the message."""
    try:
        message = decode(frames)
        if isinstance(message, WeightBlob):
            message.verify_checksum()  # an actor verifies before it swaps weights in
    except ProtocolError as exc:
        return "rejected", exc.field or ""
    return "ok", message.KIND


@pytest.mark.parametrize("vector", CHECKED_IN, ids=[v["name"] for v in CHECKED_IN])
def test_each_vector_gets_the_outcome_it_states(vector):
    frames = [bytes.fromhex(f) for f in vector["frames_hex"]]
    want = ("ok", vector["kind"]) if vector["expect"] == "ok" else ("rejected", vector["field"])
    assert outcome(frames) == want
    if "request_id" in vector:  # the id the supervisor's and a learner's refusals echo (reply_address)
        assert reply_address(frames)[1] == vector["request_id"]


def test_the_checked_in_file_is_what_this_encoder_writes():
    """A change of the bytes on the wire must be deliberate: regenerate with `python -m tests.protocol.vectors`."""
    assert vectors() == CHECKED_IN
