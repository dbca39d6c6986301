"""Turns a header dict plus arrays into frames and back, checking every cap in the order PROTOCOL.md states."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgpack
import numpy as np

from tandem.protocol.errors import ProtocolError
from tandem.protocol.limits import DEFAULT_LIMITS, PROTOCOL_VERSION, Limits

# The only dtypes that may cross the wire, by their numpy `.str` (little-endian or byte-sized).
ALLOWED_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name)
    for name in ("|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8")
}
MAX_DIM = 1 << 40
KINDS = (
    "transition_batch",
    "weight_blob",
    "weight_request",
    "heartbeat",
    "control_request",
    "control_reply",
    "game_hello",
    "game_welcome",
    "game_step",
    "game_action",
    "game_error",
    "game_bye",
)

Frame = bytes | memoryview


# ---------------------------------------------------------------------------------------------- encoding


def wire_array(name: str, array: Any) -> np.ndarray:
    """Return `array` as a C-ordered little-endian ndarray of an allowed dtype, or raise ProtocolError."""
    arr = np.asarray(array)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    if arr.dtype.str not in ALLOWED_DTYPES:
        raise ProtocolError(f"dtype {arr.dtype} is not allowed (allowed: {', '.join(ALLOWED_DTYPES)})", name)
    if arr.ndim > DEFAULT_LIMITS.max_ndim:
        raise ProtocolError(f"{arr.ndim} dimensions, at most {DEFAULT_LIMITS.max_ndim}", name)
    return np.ascontiguousarray(arr)


def array_frame(arr: np.ndarray) -> Frame:
    """The raw bytes of a C-contiguous array as a flat view (no copy)."""
    if arr.size == 0:
        return b""
    return memoryview(arr.reshape(-1).view(np.uint8))


def encode(kind: str, fields: Mapping[str, Any], arrays: Sequence[tuple[str, np.ndarray]] = ()) -> list[Frame]:
    """Header frame (msgpack map with `v`, `kind`, the fields and array descriptors) followed by array frames."""
    header: dict[str, Any] = {"v": PROTOCOL_VERSION, "kind": kind, **fields}
    prepared = [(name, wire_array(name, arr)) for name, arr in arrays]
    if prepared or kind in ("transition_batch", "weight_blob"):
        header["arrays"] = [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape)} for n, a in prepared]
    try:
        packed = msgpack.packb(header, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot be encoded as msgpack ({exc})", "header") from exc
    return [packed] + [array_frame(a) for _, a in prepared]


# ---------------------------------------------------------------------------------------------- decoding


def as_buffer(frame: Any, index: int) -> memoryview:
    """A flat byte view of one received frame (bytes, memoryview, zmq.Frame, ...)."""
    try:
        view = memoryview(frame)
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B")
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"frame is not a contiguous byte buffer ({type(frame).__name__})", f"frame[{index}]"
        ) from exc
    return view


def nesting_depth(value: Any, limit: int) -> int:
    """Depth of nested maps/lists, stopping as soon as `limit` is passed (iterative: no recursion)."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest, stack = 1, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        # Only containers go on the stack: a header is mostly scalars (names, dtypes, sizes).
        children = item.values() if isinstance(item, dict) else item
        stack.extend([(child, depth + 1) for child in children if isinstance(child, (dict, list))])
    return deepest


def decode_header(frames: Any, limits: Limits = DEFAULT_LIMITS) -> tuple[dict[str, Any], list[memoryview]]:
    """Checks 1-5 of PROTOCOL.md (frame count, header size, msgpack, version, kind); returns header and frames."""
    header, views = read_header(frames, limits)
    if "v" not in header:
        raise ProtocolError("required field is missing (the protocol version)", "v")
    version = header["v"]
    if type(version) is not int:  # a bool is not an int, nor is the string '1'
        raise ProtocolError(
            f"must be an integer (the protocol version, {PROTOCOL_VERSION}), got {type(version).__name__} "
            f"{short_repr(version)}",
            "v",
        )
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version} is not supported (this side speaks {PROTOCOL_VERSION})", "v")
    kind = header.get("kind")
    if kind not in KINDS:
        raise ProtocolError(f"unknown kind {short_repr(kind)} (known: {', '.join(KINDS)})", "kind")
    return header, views


def short_repr(value: Any, limit: int = 100) -> str:
    """repr of a peer's value for an error message, cut at `limit` characters (a header string may be 1 MiB)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def read_header(frames: Any, limits: Limits = DEFAULT_LIMITS) -> tuple[dict[str, Any], list[memoryview]]:
    """Checks 1-3 of PROTOCOL.md (frame count, header size, msgpack map); `v` and `kind` are not looked at, so a
    refusal can still read the id of a request of another version or an unknown kind."""
    if not isinstance(frames, (list, tuple)):
        raise ProtocolError(f"a message is a list of frames, got {type(frames).__name__}", "frames")
    if not 1 <= len(frames) <= limits.max_frames:
        raise ProtocolError(f"{len(frames)} frames, expected 1 to {limits.max_frames}", "frames")
    views = [as_buffer(f, i) for i, f in enumerate(frames)]
    if len(views[0]) > limits.max_header_bytes:
        raise ProtocolError(f"{len(views[0])} bytes, at most {limits.max_header_bytes}", "header")
    try:
        header = unpack_header(views[0])
    except Exception as exc:  # msgpack raises many types (ValueError, ExtraData, UnicodeDecodeError, ...)
        raise ProtocolError(f"not a valid msgpack document ({type(exc).__name__}: {exc})", "header") from exc
    if not isinstance(header, dict):
        raise ProtocolError(f"must be a msgpack map, got {type(header).__name__}", "header")
    if nesting_depth(header, limits.max_depth) > limits.max_depth:
        raise ProtocolError(f"nested deeper than {limits.max_depth}", "header")
    return header, views


def unpack_header(frame: bytes | memoryview) -> Any:
    """The msgpack document of a header frame, with no string, binary, list or map longer than the frame itself
    (so a few bytes cannot claim a huge allocation) and no extension types; raises what msgpack raises."""
    size = len(frame)
    return msgpack.unpackb(
        frame,
        raw=False,
        strict_map_key=True,
        use_list=True,
        max_ext_len=0,
        max_str_len=size,
        max_bin_len=size,
        max_array_len=size,
        max_map_len=size,
    )


def request_id_of(header: Mapping[str, Any]) -> int:
    """The header's `request_id` where it is usable as one (a non-negative int below 2**63, not a bool), else 0:
    the id a refusal echoes, whatever else is wrong with the message."""
    value = header.get("request_id")
    return value if type(value) is int and 0 <= value < 1 << 63 else 0


def expect_kind(header: Mapping[str, Any], kind: str) -> None:
    if header["kind"] != kind:
        raise ProtocolError(f"expected {kind!r}, got {header['kind']!r}", "kind")


# Field checkers: each returns the value (possibly normalised) or raises ProtocolError naming the field.
Checker = Callable[[str, Any], Any]


def string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"must be a string, got {type(value).__name__}", name)
    return value


def integer(name: str, value: Any) -> int:
    if type(value) is not int:
        raise ProtocolError(f"must be an integer, got {type(value).__name__}", name)
    return value


def count(name: str, value: Any) -> int:
    if integer(name, value) < 0:
        raise ProtocolError(f"must be >= 0, got {value}", name)
    return value


def version_or_none(name: str, value: Any) -> int:
    if integer(name, value) < -1:
        raise ProtocolError(f"must be >= -1 (-1 means none), got {value}", name)
    return value


def number(name: str, value: Any) -> float:
    if type(value) not in (int, float):
        raise ProtocolError(f"must be a number, got {type(value).__name__}", name)
    return float(value)


def boolean(name: str, value: Any) -> bool:
    if type(value) is not bool:
        raise ProtocolError(f"must be a boolean, got {type(value).__name__}", name)
    return value


def string_map(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"must be a map, got {type(value).__name__}", name)
    for key in value:
        if not isinstance(key, str):
            raise ProtocolError(f"keys must be strings, got {type(key).__name__}", name)
    return value


def number_map(name: str, value: Any) -> dict[str, float | int]:
    for key, item in string_map(name, value).items():
        if type(item) not in (int, float):
            raise ProtocolError(f"values must be numbers, got {type(item).__name__}", f"{name}.{key}")
    return value


def take_fields(header: Mapping[str, Any], spec: Mapping[str, Checker]) -> dict[str, Any]:
    """Check 6: every field of `spec` is present with its type; unknown extra fields are ignored."""
    out = {}
    for name, check in spec.items():
        if name not in header:
            raise ProtocolError("required field is missing", name)
        out[name] = check(name, header[name])
    return out


def take_arrays(
    header: Mapping[str, Any], views: Sequence[memoryview], limits: Limits = DEFAULT_LIMITS
) -> dict[str, np.ndarray]:
    """Checks 6-8 for the `arrays` descriptors: their shape, the dtype allow-list, each frame's exact length."""
    descriptors = header.get("arrays")
    if not isinstance(descriptors, list):
        raise ProtocolError("required list of array descriptors is missing", "arrays")
    if len(descriptors) != len(views) - 1:
        raise ProtocolError(
            f"header declares {len(descriptors)} arrays but {len(views) - 1} array frames follow", "arrays"
        )
    parsed = []
    for i, desc in enumerate(descriptors):
        where = f"arrays[{i}]"
        if not isinstance(desc, dict):
            raise ProtocolError("descriptor must be a map with name, dtype, shape", where)
        name = string(f"{where}.name", desc.get("name"))
        dtype_name = string(f"{where}.dtype", desc.get("dtype"))
        shape = desc.get("shape")
        if not isinstance(shape, list) or len(shape) > limits.max_ndim:
            raise ProtocolError(f"shape must be a list of at most {limits.max_ndim} sizes", f"{where}.shape")
        for dim in shape:
            if type(dim) is not int or not 0 <= dim <= MAX_DIM:
                raise ProtocolError(f"sizes must be integers in [0, 2**40], got {dim!r}", f"{where}.shape")
        parsed.append((where, name, dtype_name, shape))
    names = [p[1] for p in parsed]
    if len(set(names)) != len(names):
        raise ProtocolError("array names must be unique", "arrays")
    for where, name, dtype_name, _ in parsed:
        if dtype_name not in ALLOWED_DTYPES:
            raise ProtocolError(
                f"dtype {dtype_name!r} of {name!r} is not allowed (allowed: {', '.join(ALLOWED_DTYPES)})",
                f"{where}.dtype",
            )
    arrays = {}
    for (where, name, dtype_name, shape), view in zip(parsed, views[1:]):
        dtype = ALLOWED_DTYPES[dtype_name]
        expected = math.prod(shape) * dtype.itemsize
        if expected > limits.max_array_bytes:
            raise ProtocolError(f"{name!r} declares {expected} bytes, at most {limits.max_array_bytes}", where)
        if len(view) != expected:
            raise ProtocolError(f"{name!r} frame has {len(view)} bytes, shape x itemsize is {expected}", where)
        arrays[name] = np.frombuffer(view, dtype=dtype).reshape(shape)
    return arrays
