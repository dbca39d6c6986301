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
        GameStep(10, 7, {"unit": np.ones((3, 2), np.float32), "targets:fire": np.ones(2, np.uint8)}, 0.5),
        GameAction(10, 7, 12, {"fire": np.array([1, -1, 0]), "mode": np.array([2])}),
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
    entity_step, entity_action = decode_game(messages[8].to_frames()), decode(messages[9].to_frames())
    assert entity_step.obs["unit"].shape == (3, 2) and entity_step.obs["targets:fire"].dtype == np.uint8
    assert entity_action.action["fire"].tolist() == [1, -1, 0] and entity_action.action["mode"].tolist() == [2]
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
        ([GOOD_STEP[0], *[b""] * GAME_LIMITS.max_frames], "frames"),
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
        (frames_with(GOOD_STEP, request_id=1 << 63, reward="x"), "malformed", 0),  # an id is below 2**63
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


def test_a_batch_of_actions_is_encoded_byte_for_byte_as_each_game_action_would_be():
    from tandem.protocol.game_plain import action_frames

    cases = [
        (np.array([1, 0, 1], np.int64), [4, 5, 6], [7, 8, 9]),  # discrete
        (np.arange(6, dtype=np.float32).reshape(3, 2), [1, 2, 3], [10, 11, 12]),  # a box of 2
        (np.arange(12, dtype=">f4").reshape(3, 2, 2), [0, 2**40, 3], [1, 1, 1]),  # big-endian, 2-D box actions
    ]
    for actions, request_ids, streams in cases:
        batch = action_frames(request_ids, streams, 42, actions)
        for j, frames in enumerate(batch):
            alone = GameAction(request_ids[j], streams[j], 42, actions[j]).to_frames()
            assert [bytes(f) for f in frames] == [bytes(f) for f in alone]
            assert np.array_equal(decode_game(frames).action, actions[j].reshape(-1))
    with pytest.raises(ProtocolError, match="not allowed"):
        action_frames([1], [1], 0, np.array([1 + 2j]))


def test_a_request_or_reply_is_unpacked_once(monkeypatch):
    # a server reads a header per frame of every game: unpacking it twice was a fifth of its time per request
    calls = []
    real = msgpack.unpackb
    monkeypatch.setattr(msgpack, "unpackb", lambda *a, **k: calls.append(1) or real(*a, **k))
    received = [bytes(f) for f in GOOD_STEP]  # as a server receives it (game_socket.recv_now)
    for frames in (GOOD_STEP, received):  # the general path, then the plain one
        calls.clear()
        assert isinstance(decode_request(frames), GameStep) and len(calls) == 1
    for frames in (GameBye(3).to_frames(), GameHello(1, "g", 2, SPACES).to_frames()):
        calls.clear()
        assert decode_request(frames).request_id in (1, 3) and len(calls) == 1
    for action in (np.array([1]), None):
        calls.clear()
        assert isinstance(decode_game(GameAction(1, 2, 3, action).to_frames()), GameAction) and len(calls) == 1


def plain_cases() -> list[list[bytes]]:
    """Steps and actions, plain and not: every malformed form above, others' fields, other types and sizes."""
    obs = np.arange(6, dtype=np.float32)
    steps = [
        GameStep(1, 2, obs, 1.5),
        GameStep(0, 0, obs.reshape(2, 3), -1, True, False),
        GameStep(9, 3, np.zeros(4, np.uint8), 0.0, False, True),
        GameStep(2**62, 1, np.zeros((0, 3), np.int16)),
    ]
    actions = [
        GameAction(1, 2, 5, np.array(1, np.int64)),
        GameAction(3, 4, -1),
        GameAction(5, 6, 0, np.ones(3, np.float32)),
    ]
    cases = [m.to_frames() for m in steps + actions]
    for frames in [m.to_frames() for m in steps[:1] + actions[:2]]:
        for changes in (
            {"request_id": -1},
            {"request_id": True},
            {"request_id": 1.0},
            {"stream": None},
            {"reward": float("nan")},
            {"reward": "1"},
            {"reward": True},
            {"done": 1},
            {"truncated": None},
            {"version": -2},
            {"version": 1.5},
            {"v": 2},
            {"v": True},
            {"kind": "game_hello"},
            {"kind": "game_step"},
            {"kind": "game_action"},
            {"extra": 1},
            {"extra": [[[[1]]]]},
            {"arrays": []},
            {"arrays": {}},
            {"arrays": [{"name": "obs", "dtype": "<f4", "shape": [6]}] * 2},
            {"arrays": [{"name": "obs", "dtype": "<c8", "shape": [6]}]},
            {"arrays": [{"name": "obs", "dtype": "<f4", "shape": [7]}]},
            {"arrays": [{"name": "obs", "dtype": "<f4", "shape": [2, 3]}]},
            {"arrays": [{"name": "obs", "dtype": "<f4", "shape": [-6]}]},
            {"arrays": [{"name": "obs", "dtype": "<f4", "shape": [True] * 6}]},
            {"arrays": [{"name": "obs", "dtype": "<f4", "shape": [6], "x": 1}]},
            {"arrays": [{"name": "action", "dtype": "<i8", "shape": [1, 1]}]},
            {"arrays": [{"name": "action", "dtype": "<i8", "shape": [1]}]},
        ):
            head = header(frames)
            head.update(changes)
            cases.append([msgpack.packb(head, use_bin_type=True), *frames[1:]])
    cases += [
        [bytes(f) for f in GOOD_STEP] + [b""],
        [GOOD_STEP[0]],
        [b"\xc1garbage", b""],
        [b"", b""],
        [msgpack.packb([1, 2]), b""],
        [bytes(GOOD_STEP[0]), b"\x00" * 15],
    ]
    return [[bytes(f) for f in frames] for frames in cases]


def test_the_plain_paths_take_only_what_the_general_path_takes_and_read_it_alike():
    from tandem.protocol.game_plain import decode_reply, plain_action, plain_step

    fast_ones = 0
    for frames in plain_cases():
        for plain, general in (
            (plain_step, lambda f: GameStep.from_frames(f, GAME_LIMITS)),
            (plain_action, decode_game),
        ):
            fast = plain(frames)
            try:
                slow = general(frames)
            except ProtocolError:
                slow = None
            if fast is None:
                continue
            fast_ones += 1
            assert type(fast) is type(slow), (frames, fast, slow)
            for name in ("request_id", "stream", "reward", "done", "truncated", "version"):
                assert getattr(fast, name, None) == getattr(slow, name, None) and type(
                    getattr(fast, name, None)
                ) is type(getattr(slow, name, None)), name
            for name in ("obs", "action"):
                a, b = getattr(fast, name, None), getattr(slow, name, None)
                assert (a is None) == (b is None) and (
                    a is None
                    or (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) and not a.flags.writeable)
                )
        try:
            want = decode_game(frames)
        except ProtocolError as exc:
            with pytest.raises(ProtocolError, match=re.escape(str(exc))):
                decode_reply(frames)
        else:
            assert type(decode_reply(frames)) is type(want)
    assert fast_ones == 12  # the 7 plain messages, and 5 changes that leave one plain (its own kind, obs 2 x 3)
