"""Writes protocol/test_vectors.json: byte-exact messages with the outcome PROTOCOL.md gives each.

Run `python -m tests.protocol.vectors` after a deliberate wire change; tests/protocol/test_vectors.py
checks the checked-in file against the decoder (and the valid ones against the encoder) on every run.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import msgpack
import numpy as np

from tandem.protocol import ControlReply, ControlRequest, Heartbeat, TransitionBatch, WeightBlob, WeightRequest
from tandem.protocol.limits import PROTOCOL_VERSION
from tests.protocol.samples import batch_of, unchecked_frames

PATH = Path(__file__).resolve().parents[2] / "protocol" / "test_vectors.json"


def tiny_batch() -> TransitionBatch:
    """T=2 steps of K=1 env, obs float32[2]; the episode is truncated at step 1 (so final_obs has a row)."""
    obs = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    actions, rewards = np.array([[0], [1]], np.int64), np.array([[1.0], [1.0]], np.float32)
    terminated, truncated = np.zeros((2, 1), bool), np.array([[False], [True]])
    return batch_of(obs, actions, rewards, terminated, truncated, np.array([[9.0, 9.5]], np.float32), env_steps=2)


def with_state(batch: TransitionBatch, state: np.ndarray) -> list[bytes]:
    """The batch's frames with a `core_state` array (PROTOCOL.md 2.1.3) as given, checked or not."""
    return unchecked_frames(dataclasses.replace(batch, core_state=state))


def keyed_batch(final_keys: tuple[str, ...] = ("image", "direction")) -> list[bytes]:
    """tiny_batch with a Dict observation (PROTOCOL.md 2.1.4): an image key and a direction key."""
    obs = {"image": np.arange(12, dtype=np.uint8).reshape(3, 1, 2, 2), "direction": np.array([[0], [1], [2]], np.int64)}
    final = {"image": np.full((1, 2, 2), 7, np.uint8), "direction": np.array([3], np.int64)}
    keyed = dataclasses.replace(tiny_batch(), obs=obs, final_obs={k: final[k] for k in final_keys})
    return unchecked_frames(keyed)


def keyed_stacked_batch(history_shape: tuple[int, ...] = (1, 2, 2, 2)) -> list[bytes]:
    """keyed_batch with its image the last 3 views, sent as its newest views (PROTOCOL.md 2.1.5): obs.image holds
    them and obs_history.image [K, 2, *view] the two views before obs[0]'s."""
    obs = {"image": np.arange(12, dtype=np.uint8).reshape(3, 1, 2, 2), "direction": np.array([[0], [1], [2]], np.int64)}
    final = {"image": np.full((1, 2, 2), 7, np.uint8), "direction": np.array([3], np.int64)}
    history = {"image": np.arange(100, 100 + int(np.prod(history_shape)), dtype=np.uint8).reshape(history_shape)}
    stacked = dataclasses.replace(tiny_batch(), obs=obs, final_obs=final, obs_stacks={"image": 3}, obs_history=history)
    return unchecked_frames(stacked)


def entity_batch(counts=((1,), (0,), (2,)), final_count: int = 1) -> list[bytes]:
    """tiny_batch with entity observations (PROTOCOL.md 2.1.7): `unit` rows of 2 features padded to 2, counted in
    `count:unit`, sent as the rows present; the final observation holds `final_count` units."""
    counts = np.array(counts, np.int32)
    units = np.zeros((3, 1, 2, 2), np.float32)
    units[np.arange(2) < counts[..., None]] = [0.5, -1.0]
    final = np.zeros((1, 2, 2), np.float32)
    final[0, :final_count] = 4.0
    obs = {"unit": units, "count:unit": counts}
    keyed = dataclasses.replace(
        tiny_batch(), obs=obs, final_obs={"unit": final, "count:unit": np.array([final_count], np.int32)}
    )
    return unchecked_frames(keyed)


def header(**fields) -> bytes:
    return msgpack.packb({"v": PROTOCOL_VERSION, **fields}, use_bin_type=True)


def with_dtype(batch_header: bytes, dtype: str) -> bytes:
    """The batch's header with its first array (obs) declared as `dtype`."""
    fields = msgpack.unpackb(batch_header)
    fields["arrays"][0]["dtype"] = dtype
    return msgpack.packb(fields, use_bin_type=True)


def frames_of(message) -> list[bytes]:
    return [bytes(f) for f in message.to_frames()]


def vectors() -> list[dict]:
    """(name, frames, expected outcome): ok with the decoded kind, or rejected naming the field."""
    batch = frames_of(tiny_batch())
    blob = frames_of(WeightBlob.build("default", 5, 40, {"w": np.array([[0.5, -1.0]], np.float32)}))
    ok = [
        ("heartbeat", frames_of(Heartbeat("actor", "actor-0", 4242, "box", 1, 0, "running", 1.5, {"env_steps": 100}))),
        ("control_request status", frames_of(ControlRequest(17, "status", {}))),
        (
            "control_request rendezvous",
            frames_of(
                ControlRequest(
                    18,
                    "rendezvous",
                    {"policy": "default", "rank": 1, "world_size": 2, "store": "127.0.0.1:29500", "generation": -1},
                )
            ),
        ),
        (
            "control_reply rendezvous formed",
            frames_of(ControlReply(18, True, data={"master": "127.0.0.1:29400", "generation": 3, "members": [1, 0]})),
        ),
        (
            "control_request rendezvous probe",
            frames_of(
                ControlRequest(19, "rendezvous", {"policy": "default", "rank": 0, "world_size": 2, "probe": True})
            ),
        ),
        ("control_reply ok", frames_of(ControlReply(17, True, data={"granted": True}))),
        ("weight_request", frames_of(WeightRequest("default", 4, "actor-0"))),
        ("weight_blob one tensor", blob),
        ("transition_batch truncated step", batch),
        (
            "transition_batch with a recurrent state",
            with_state(tiny_batch(), np.array([[0.25, -0.5, 1.0]], np.float32)),
        ),
        ("transition_batch Dict observation with a stacked image key", keyed_stacked_batch()),
        ("transition_batch entity observations sent as the rows present", entity_batch()),
        ("weight_request for a pooled version", frames_of(WeightRequest("default", -1, "actor-0", 40))),
        (
            "transition_batch with self-play results",
            frames_of(dataclasses.replace(tiny_batch(), games=((10, 1.0), (-1, 0.5), (20, 0.0)))),
        ),
        (
            "transition_batch with a league game against another policy's version",
            frames_of(dataclasses.replace(tiny_batch(), games=((10, 1.0), (30, 0.0, "exploiter")))),
        ),
        (
            "weight_blob listing its learner's opponent pool",
            frames_of(WeightBlob.build("default", 45, 90, {"w": np.array([[0.5]], np.float32)}, pool=[10, 20, 40])),
        ),
    ]
    bad = [
        ("no frames", [], "frames"),
        ("header not msgpack", [b"\xc1"], "header"),
        ("header a list, not a map", [msgpack.packb([1, 2])], "header"),
        ("protocol version 2", [msgpack.packb({"v": 2, "kind": "heartbeat"})], "v"),
        ("protocol version the string '1'", [msgpack.packb({"v": "1", "kind": "heartbeat"})], "v"),
        ("unknown kind", [header(kind="shell_command")], "kind"),
        (
            "heartbeat pid a string",
            [
                header(
                    kind="heartbeat",
                    role="actor",
                    name="actor-0",
                    pid="4242",
                    host="h",
                    incarnation=1,
                    seq=0,
                    stage="running",
                    stage_elapsed_s=0.0,
                )
            ],
            "pid",
        ),
        ("control_request without request_id", [header(kind="control_request", command="stop", args={})], "request_id"),
        (
            "control_request args not a map",
            [header(kind="control_request", request_id=9, command="stop", args=[1])],
            "args",
            9,
        ),
        (
            "control_request of protocol version 2",
            [msgpack.packb({"v": 2, "kind": "control_request", "request_id": 11, "command": "status", "args": {}})],
            "v",
            11,
        ),
        (
            "control_request with v the string '1'",
            [msgpack.packb({"v": "1", "kind": "control_request", "request_id": 12, "command": "status", "args": {}})],
            "v",
            12,
        ),
        (
            "control_request of an unknown kind",
            [header(kind="control_requets", request_id=13, command="status", args={})],
            "kind",
            13,
        ),
        ("transition_batch short array frame", [batch[0], *batch[1:3], batch[3][:-1], *batch[4:]], "arrays[2]"),
        ("transition_batch one array frame missing", batch[:-1], "arrays"),
        ("transition_batch object dtype", [with_dtype(batch[0], "|O"), *batch[1:]], "arrays[0].dtype"),
        ("transition_batch big-endian dtype", [with_dtype(batch[0], ">f4"), *batch[1:]], "arrays[0].dtype"),
        (
            "transition_batch recurrent state NaN",
            with_state(tiny_batch(), np.array([[0.0, np.nan]], np.float32)),
            "core_state",
        ),
        ("transition_batch recurrent state float64", with_state(tiny_batch(), np.zeros((1, 2))), "core_state"),
        (
            "transition_batch recurrent state for 2 envs of 1",
            with_state(tiny_batch(), np.zeros((2, 2), np.float32)),
            "core_state",
        ),
        ("transition_batch Dict observation without final_obs.direction", keyed_batch(("image",)), "final_obs"),
        (
            "transition_batch stacked image key with a history one view short",
            keyed_stacked_batch((1, 1, 2, 2)),
            "obs_history.image",
        ),
        ("transition_batch entity count over its bound", entity_batch(counts=((1,), (3,), (2,))), "obs.count:unit"),
        ("transition_batch entity final rows that do not add up", entity_batch(final_count=-1), "final_obs.count:unit"),
        (
            "transition_batch self-play score of 0.7",
            unchecked_frames(dataclasses.replace(tiny_batch(), games=((10, 0.7),))),
            "games",
        ),
        (
            "transition_batch league game naming an empty policy",
            unchecked_frames(dataclasses.replace(tiny_batch(), games=((10, 1.0, ""),))),
            "games",
        ),
        (
            "transition_batch league game against another policy's live weights (-1)",
            unchecked_frames(dataclasses.replace(tiny_batch(), games=((-1, 1.0, "exploiter"),))),
            "games",
        ),
        (
            "weight_blob pool not rising",
            [header(**{**msgpack.unpackb(blob[0]), "pool": [20, 10]}), *blob[1:]],
            "pool",
        ),
        (
            "weight_request pooled version negative",
            [header(kind="weight_request", policy_id="default", have_version=-1, requester="a", version=-3)],
            "version",
        ),
        ("pickle bytes as a header", [b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."], "header"),
        ("weight_blob checksum wrong", [header(**{**msgpack.unpackb(blob[0]), "checksum": 1}), *blob[1:]], "checksum"),
    ]
    out = [
        {"name": n, "frames_hex": [f.hex() for f in fr], "expect": "ok", "kind": msgpack.unpackb(fr[0])["kind"]}
        for n, fr in ok
    ]
    for name, frames, field, *request_id in bad:
        vector = {"name": name, "frames_hex": [f.hex() for f in frames], "expect": "rejected", "field": field}
        if request_id:  # a refusal on a socket with replies echoes this id (PROTOCOL.md 2.5.2)
            vector["request_id"] = request_id[0]
        out.append(vector)
    return out


def main() -> None:
    PATH.write_text(
        json.dumps(
            {
                "about": "Tandem wire protocol v1 test vectors: each message's frames in hex and what a receiver "
                "must do. "
                "'ok': it decodes, as 'kind'; 'rejected': it is dropped (counted), the error naming 'field', and "
                "where 'request_id' is given, a refusal on a socket with replies carries that id. "
                "See PROTOCOL.md section 4 for the order of checks.",
                "protocol_version": PROTOCOL_VERSION,
                "vectors": vectors(),
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
