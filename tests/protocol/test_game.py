"""The game protocol's messages: each round-trips, and each malformed form is a ProtocolError naming the field."""

from __future__ import annotations

import re

import msgpack
import numpy as np
import pytest

from tandem.protocol import ProtocolError, decode, framing
from tandem.protocol.game import (
    ERROR_CODES,
    GAME_LIMITS,
    NOTICE_CODES,
    GameAction,
    GameBye,
    GameError,
    GameHello,
    GameSpaces,
    GameStep,
    GameWelcome,
    decode_game,
)
from tandem.protocol.game_requests import BadRequest, decode_request
from tests.system.harness import ROOT

SPACES = GameSpaces((4,), "<f4", "discrete", 2, (), "<i8")


def header(frames):
    return msgpack.unpackb(bytes(frames[0]), raw=False)


def frames_with(frames, **changes):
    head = header(frames)
    head.update(changes)
    return [msgpack.packb(head, use_bin_type=True), *frames[1:]]


def test_every_game_message_round_trips_through_both_decoders():
    obs = np.arange(4, dtype=np.float32)
    messages = [
        GameHello(1, "pong", 3, SPACES),
        GameHello(2, "bare"),
        GameWelcome(1, [7, 8, 9], SPACES, 10.0, "actor-0"),
        GameStep(5, 7, obs, 1.5, False, True),
        GameAction(5, 7, 12, np.array(1, np.int64)),
        GameAction(6, 7, 12),
        GameError(5, "bad_obs", "obs must be <f4 [4]", False),
        GameBye(9, "quit"),
    ]
    for message in messages:
        for decoded in (decode_game(message.to_frames()), decode(message.to_frames())):
            assert type(decoded) is type(message)
            for name in (
                "request_id",
                "game",
                "streams",
                "spaces",
                "reward",
                "done",
                "truncated",
                "version",
                "code",
                "fatal",
                "reason",
                "stream",
                "timeout_s",
            ):
                assert getattr(decoded, name, None) == getattr(message, name, None), name
    step = decode_game(messages[3].to_frames())
    assert step.obs.dtype == np.float32 and np.array_equal(step.obs, obs)
    assert (
        decode_game(messages[4].to_frames()).action.tolist() == [1]
        and decode_game(messages[5].to_frames()).action is None
    )


def test_space_differences_are_named_in_words():
    other = GameSpaces((5,), "<f4", "discrete", 3, (), "<i8")
    assert SPACES.differences(other) == ["obs_shape [4] != [5]", "action_n 2 != 3"]
    assert SPACES.differences(SPACES) == []


GOOD_STEP = GameStep(3, 1, np.zeros(4, np.float32), 0.5).to_frames()


@pytest.mark.parametrize(
    "frames, field",
    [
        (frames_with(GOOD_STEP, reward=float("nan")), "reward"),
        (frames_with(GOOD_STEP, reward=float("inf")), "reward"),
        (frames_with(GOOD_STEP, reward="1"), "reward"),
        (frames_with(GOOD_STEP, done=1), "done"),
        (frames_with(GOOD_STEP, stream=-1), "stream"),
        (frames_with(GOOD_STEP, request_id="x"), "request_id"),
        (frames_with(GOOD_STEP, kind="transition_batch"), "kind"),
        (frames_with(GOOD_STEP, kind="game_nonsense"), "kind"),
        (frames_with(GOOD_STEP, v=2), "v"),
        (GOOD_STEP[:1], "arrays"),  # the obs frame is missing
        ([GOOD_STEP[0], b"\x00" * 15], "arrays[0]"),  # a frame one byte short of its shape
        (frames_with(GOOD_STEP, arrays=[{"name": "obs", "dtype": "<c8", "shape": [4]}]), "arrays[0].dtype"),
        (frames_with(GOOD_STEP, arrays=[{"name": "x", "dtype": "<f4", "shape": [4]}]), "arrays"),
        ([b"\xc1garbage"], "header"),
        ([b"\x00" * (GAME_LIMITS.max_header_bytes + 1)], "header"),
        ([GOOD_STEP[0], b"", b"", b"", b""], "frames"),
        (GameHello(1, "g", 0).to_frames(), "streams"),
        (GameHello(1, "g", 257).to_frames(), "streams"),
        (frames_with(GameHello(1, "g").to_frames(), game="x" * 201), "game"),
        (frames_with(GameHello(1, "g").to_frames(), spaces={"obs_shape": [4]}), "spaces.obs_dtype"),
        (
            frames_with(GameHello(1, "g", 1, SPACES).to_frames(), spaces={**SPACES.to_wire(), "action_kind": "tuple"}),
            "spaces.action_kind",
        ),
    ],
)
def test_malformed_game_messages_name_what_is_wrong(frames, field):
    with pytest.raises(ProtocolError) as err:
        decode_game(frames)
    assert err.value.field == field, str(err.value)


def test_a_huge_declared_observation_is_refused_before_its_bytes_are_read():
    frames = frames_with(GOOD_STEP, arrays=[{"name": "obs", "dtype": "<f4", "shape": [1 << 30]}])
    with pytest.raises(ProtocolError, match="at most"):
        decode_game(frames)


def test_a_non_game_kind_is_not_a_game_message():
    frames = framing.encode("heartbeat", {"role": "x"})
    with pytest.raises(ProtocolError, match="not a game message"):
        decode_game(frames)


def test_a_hello_may_leave_out_its_spaces():
    hello = decode_game(framing.encode("game_hello", {"request_id": 1, "game": "g", "streams": 2}))
    assert isinstance(hello, GameHello) and hello.spaces is None and hello.streams == 2


@pytest.mark.parametrize(
    "frames, code, request_id",
    [
        ([b"\xc1garbage"], "malformed", 0),
        ([b"\x00" * (GAME_LIMITS.max_header_bytes + 1)], "malformed", 0),
        ([msgpack.packb([1, 2])], "malformed", 0),  # not a map
        (frames_with(GOOD_STEP, v=2), "malformed", 3),  # another version: the id is still readable
        (frames_with(GOOD_STEP, v=2, kind="game_nonsense"), "malformed", 3),  # the version comes first
        (frames_with(GOOD_STEP, kind="game_nonsense"), "bad_kind", 3),
        (frames_with(GOOD_STEP, kind="heartbeat"), "bad_kind", 3),
        (frames_with(GOOD_STEP, kind="game_welcome"), "bad_kind", 3),  # before its fields: none of them are there
        (frames_with(GOOD_STEP, kind=None), "malformed", 3),
        (frames_with(GOOD_STEP, reward="x"), "malformed", 3),
        (frames_with(GOOD_STEP, request_id=-1), "malformed", 0),
        (frames_with(GOOD_STEP, request_id=1.0), "malformed", 0),
        (frames_with(GOOD_STEP, stream=-1), "malformed", 3),
        (GameHello(9, "g", 0).to_frames(), "malformed", 9),
        (GameHello(9, "g", 257).to_frames(), "malformed", 9),
    ],
)
def test_a_server_refuses_in_order_and_answers_with_every_readable_request_id(frames, code, request_id):
    with pytest.raises(BadRequest) as bad:
        decode_request(frames)
    assert (bad.value.code, bad.value.request_id) == (code, request_id), str(bad.value)


def test_a_server_takes_hello_step_and_bye():
    for message in (GameHello(1, "g"), GameStep(2, 1, np.zeros(4, np.float32)), GameBye(3)):
        assert type(decode_request(message.to_frames())) is type(message)


def test_every_error_code_is_in_the_protocols_table_and_back():
    text = (ROOT / "protocol" / "PROTOCOL.md").read_text()
    table = text[text.index("### 7.2 Errors") : text.index("### 7.3")]
    codes = re.findall(r"^\| `([a-z_]+)` \| (?:yes|no) \|", table, re.M)
    assert codes == list(ERROR_CODES)
    assert set(NOTICE_CODES) <= set(codes)
