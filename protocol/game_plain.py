"""The two messages of every frame, a game's step and a server's action, read fast in their plain form, and
a server's batch of actions written at once.

A step or an action in its plain form (exactly the header fields PROTOCOL.md 7.1 lists, each of the type it
must have, one array frame of the declared size) is decoded here with every check the general path makes
(section 1's caps, the field types, the dtype allow-list, the frame's exact length), at a fraction of its
cost. Anything else, well-formed or not (extra fields, another kind, a malformed header), gets None, and the
caller goes the general way, which also words the refusal. A test holds the two paths to the same answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np

from tandem.protocol import framing
from tandem.protocol.errors import ProtocolError
from tandem.protocol.game import GAME_LIMITS, GameAction, GameStep, decode_game
from tandem.protocol.limits import PROTOCOL_VERSION, Limits

STEP_FIELDS = frozenset(("v", "kind", "request_id", "stream", "reward", "done", "truncated", "arrays"))
ACTION_FIELDS = frozenset(("v", "kind", "request_id", "stream", "version", "arrays"))
ACK_FIELDS = frozenset(("v", "kind", "request_id", "stream", "version"))  # an episode's end: no action
DESCRIPTOR_FIELDS = frozenset(("name", "dtype", "shape"))
PLAIN_DEPTH = 4  # header map > arrays list > descriptor map > shape list


def plain_header(frames: Sequence[Any], limits: Limits, count: int) -> dict[str, Any] | None:
    """The header map of `count` bytes frames, unpacked as framing.decode_header does; None if anything differs."""
    if type(frames) not in (list, tuple) or len(frames) != count or count > limits.max_frames:
        return None
    if limits.max_depth < PLAIN_DEPTH:
        return None
    for frame in frames:
        if type(frame) is not bytes:
            return None
    if len(frames[0]) > limits.max_header_bytes:
        return None
    try:
        header = framing.unpack_header(frames[0])
    except Exception:  # the general path says what is wrong
        return None
    if type(header) is not dict or type(header.get("v")) is not int or header["v"] != PROTOCOL_VERSION:
        return None
    return header


def plain_array(header: dict[str, Any], frame: bytes, name: str, limits: Limits) -> np.ndarray | None:
    """The one array `name` its descriptor declares, over `frame`; None unless declared and sized exactly so."""
    arrays = header["arrays"]
    if type(arrays) is not list or len(arrays) != 1:
        return None
    descriptor = arrays[0]
    if type(descriptor) is not dict or descriptor.keys() != DESCRIPTOR_FIELDS or descriptor["name"] != name:
        return None
    dtype_name, shape = descriptor["dtype"], descriptor["shape"]
    dtype = framing.ALLOWED_DTYPES.get(dtype_name) if type(dtype_name) is str else None
    if dtype is None or type(shape) is not list or len(shape) > limits.max_ndim:
        return None
    size = dtype.itemsize
    for dim in shape:
        if type(dim) is not int or not 0 <= dim <= framing.MAX_DIM:
            return None
        size *= dim
    if size > limits.max_array_bytes or len(frame) != size:
        return None
    return np.frombuffer(frame, dtype=dtype).reshape(shape)


def counts(*values: Any) -> bool:
    """Each is an int >= 0 (not a bool), as framing.count wants."""
    return all(type(v) is int and v >= 0 for v in values)


def plain_step(frames: Sequence[Any], limits: Limits = GAME_LIMITS) -> GameStep | None:
    """A plain game_step as GameStep.from_frames reads it, or None (then ask the general path)."""
    header = plain_header(frames, limits, 2)
    if header is None or header.keys() != STEP_FIELDS or header["kind"] != GameStep.KIND:
        return None
    request_id, stream, reward = header["request_id"], header["stream"], header["reward"]
    done, truncated = header["done"], header["truncated"]
    if not counts(request_id, stream) or type(done) is not bool or type(truncated) is not bool:
        return None
    if type(reward) not in (int, float) or not math.isfinite(reward):
        return None
    obs = plain_array(header, frames[1], "obs", limits)
    if obs is None:
        return None
    return GameStep(request_id, stream, obs, float(reward), done, truncated)


def plain_action(frames: Sequence[Any], limits: Limits = GAME_LIMITS) -> GameAction | None:
    """A plain game_action (with its flat action, or an episode's end without one), or None."""
    header = plain_header(frames, limits, len(frames))
    if header is None or header["kind"] != GameAction.KIND:
        return None
    keys = header.keys()
    if not (keys == ACTION_FIELDS and len(frames) == 2 or keys == ACK_FIELDS and len(frames) == 1):
        return None
    request_id, stream, version = header["request_id"], header["stream"], header["version"]
    if not counts(request_id, stream) or type(version) is not int or version < -1:
        return None
    if len(frames) == 1:
        return GameAction(request_id, stream, version)
    action = plain_array(header, frames[1], "action", limits)
    if action is None or action.ndim != 1:
        return None
    return GameAction(request_id, stream, version, action)


def decode_reply(frames: Sequence[Any], limits: Limits = GAME_LIMITS) -> Any:
    """What a game receives, as `decode_game` reads it (ProtocolError for anything malformed), an action fast."""
    action = plain_action(frames, limits)
    return action if action is not None else decode_game(frames, limits)


def action_frames(
    request_ids: Sequence[int], streams: Sequence[int], version: int, actions: np.ndarray
) -> list[list[framing.Frame]]:
    """The frames of `GameAction(request_ids[j], streams[j], version, actions[j])` for every j, byte for byte
    what `to_frames` makes, for a server answering a batch: the batch's actions are checked and laid out
    once, and each reply is one small header and one slice of them."""
    flat = framing.wire_array("action", np.asarray(actions).reshape(len(actions), -1))  # as each to_frames: flat
    described = [{"name": "action", "dtype": flat.dtype.str, "shape": [flat.shape[1]]}]
    out = []
    for j, (request_id, stream) in enumerate(zip(request_ids, streams)):
        fields = {
            "v": PROTOCOL_VERSION,
            "kind": GameAction.KIND,
            "request_id": request_id,
            "stream": stream,
            "version": version,
            "arrays": described,
        }
        try:
            header = msgpack.packb(fields, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"cannot be encoded as msgpack ({exc})", "header") from exc
        out.append([header, flat[j].tobytes()])
    return out
