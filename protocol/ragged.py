"""Entity keys on the wire: a padded key of a Dict observation sent as only the rows present (PROTOCOL.md 2.1.7).

In memory an entity type's key is padded to its bound, `[..., N, *row]`, with its count beside it under
`count:KEY` (`[...]`, int32). On the wire the key carries only the rows the counts say are present, all steps'
rows one after another in (t, k) order, `[E, *row]` with E the sum of the counts; the header's `ragged` names each
such key with its bound N, and the receiver pads it back. The bytes a key takes grow with its entities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tandem.protocol.errors import ProtocolError

COUNT_PREFIX = "count:"  # the count key of entity key KEY is `count:KEY`
RAGGED = "ragged"  # header field: {KEY: N}, each key sent ragged and its bound
MAX_BOUND = 4096  # entities of one type per observation a receiver accepts
MAX_PADDED_BYTES = 1 << 30  # a batch's ragged keys padded back to their bounds take at most this, all together


class RaggedError(ProtocolError):
    """A ragged key that does not add up; counted apart from other malformed frames (`malformed_entities`)."""

    reason = "entities"


def count_key(key: str) -> str:
    return f"{COUNT_PREFIX}{key}"


def ragged_keys(obs: Any) -> dict[str, int]:
    """KEY -> N for each key of a keyed observation batch `[T+1, K, N, ...]` that has a `count:KEY` beside it."""
    if not isinstance(obs, Mapping):
        return {}
    return {key: int(arr.shape[2]) for key, arr in obs.items() if count_key(key) in obs and arr.ndim >= 3}


def present(counts: np.ndarray, bound: int) -> np.ndarray:
    """[..., N] bool: which of the N padded rows of each observation the counts say are there."""
    return np.arange(bound) < counts[..., None]


def pack(padded: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The rows present of `padded` [*lead, N, *row], in row-major order of `lead`: [E, *row]."""
    lead = counts.ndim
    return padded[present(counts, padded.shape[lead])]


def unpack(values: Any, counts: Any, bound: Any, where: str, count_name: str) -> np.ndarray:
    """`values` [E, *row] back into [*counts.shape, bound, *row], zeros where no entity is; RaggedError naming
    `where` or `count_name` unless the counts are integers in [0, bound] adding up to E and the values are finite."""
    if type(bound) is not int or not 0 < bound <= MAX_BOUND:
        raise RaggedError(f"bound must be an integer in [1, {MAX_BOUND}], got {bound!r}", RAGGED)
    if not isinstance(counts, np.ndarray) or counts.dtype != np.int32:
        got = counts.dtype if isinstance(counts, np.ndarray) else type(counts).__name__
        raise RaggedError(f"must be int32, got {got}", count_name)
    if counts.size and (counts.min() < 0 or counts.max() > bound):
        raise RaggedError(f"counts must be in [0, {bound}], got {int(counts.min())}..{int(counts.max())}", count_name)
    if not isinstance(values, np.ndarray) or values.ndim < 1:
        raise RaggedError("must be an array of rows [E, ...]", where)
    total = int(counts.sum(dtype=np.int64))
    if values.shape[0] != total:
        raise RaggedError(f"holds {values.shape[0]} rows but {count_name} adds up to {total}", where)
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise RaggedError("holds NaN or infinite values", where)
    shape = (*counts.shape, bound, *values.shape[1:])
    out = np.zeros(shape, values.dtype)
    out[present(counts, bound)] = values
    return out


def bounds_field(value: Any, obs: Mapping[str, Any]) -> dict[str, int]:
    """The header's `ragged`: a map of keys of `obs`, each with a `count:KEY` key, to bounds in [1, MAX_BOUND]."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise RaggedError("must map keys of obs to their bounds", RAGGED)
    for key, bound in value.items():
        if key.startswith(COUNT_PREFIX):
            raise RaggedError(f"names {key!r}: a count key travels whole", RAGGED)
        if key not in obs:
            raise RaggedError(f"names {key!r}, which is not a key of obs", RAGGED)
        if count_key(key) not in obs:
            raise RaggedError(f"names {key!r}, but obs has no {count_key(key)!r} key for its counts", RAGGED)
        if type(bound) is not int or not 0 < bound <= MAX_BOUND:
            raise RaggedError(f"{key!r}: bound must be an integer in [1, {MAX_BOUND}], got {bound!r}", RAGGED)
    return dict(value)


def pack_keyed(obs: Mapping[str, np.ndarray], bounds: Mapping[str, int], lead: int) -> dict[str, np.ndarray]:
    """A keyed batch (leading `lead` dims) with each ragged key sent as its rows present; the rest unchanged."""
    out = dict(obs)
    for key in bounds:
        counts = obs[count_key(key)]
        out[key] = pack(obs[key], counts.reshape(obs[key].shape[:lead]))
    return out


def padded_bytes(keyed: Sequence[Mapping[str, Any]], bounds: Mapping[str, int]) -> int:
    """What the ragged keys of these keyed batches take once padded back to their bounds (counted before any is)."""
    total = 0
    for obs in keyed:
        for key, bound in bounds.items():
            values, counts = obs[key], obs[count_key(key)]
            if isinstance(values, np.ndarray) and isinstance(counts, np.ndarray) and values.ndim >= 1:
                total += math.prod((*counts.shape, bound, *values.shape[1:])) * values.dtype.itemsize
    return total


def check_counts(obs: Mapping[str, Any], name: str, lead: int) -> None:
    """Every entity key's counts, ragged or sent whole: int32 of the key's leading shape, each in [0, its bound]
    (the policy cuts its batches by them); RaggedError naming the count key."""
    for key, arr in obs.items():
        counts = obs.get(count_key(key))
        if counts is None or not isinstance(arr, np.ndarray) or arr.ndim <= lead:
            continue
        where = f"{name}.{count_key(key)}"
        if not isinstance(counts, np.ndarray) or counts.dtype != np.int32 or counts.shape != arr.shape[:lead]:
            got = f"{counts.dtype} {list(counts.shape)}" if isinstance(counts, np.ndarray) else type(counts).__name__
            raise RaggedError(f"must be int32 {list(arr.shape[:lead])}, got {got}", where)
        bound = arr.shape[lead]
        if counts.size and (counts.min() < 0 or counts.max() > bound):
            raise RaggedError(f"counts must be in [0, {bound}], got {int(counts.min())}..{int(counts.max())}", where)


def unpack_keyed(obs: dict[str, Any], bounds: Mapping[str, int], name: str) -> None:
    """Each ragged key of `obs` (the arrays named `name`.KEY) padded back to its bound, in place."""
    for key, bound in bounds.items():
        obs[key] = unpack(obs[key], obs[count_key(key)], bound, f"{name}.{key}", f"{name}.{count_key(key)}")


def take_ragged(value: Any, arrays: dict[str, Any]) -> None:
    """The header's `ragged` keys of `obs` and `final_obs` padded back to their bounds, in place (2.1.7)."""
    obs, final = arrays.get("obs"), arrays.get("final_obs")
    if not isinstance(obs, Mapping) or not isinstance(final, Mapping):
        raise RaggedError("names keys of obs.KEY arrays; this batch's obs is one array", RAGGED)
    bounds = bounds_field(value, obs)
    need = padded_bytes((obs, final), bounds)
    if need > MAX_PADDED_BYTES:  # the bound multiplies what was sent: refuse before allocating a byte
        raise RaggedError(f"padded back, its keys would take {need} bytes, at most {MAX_PADDED_BYTES}",
                                 RAGGED)  # fmt: skip
    unpack_keyed(obs, bounds, "obs")
    unpack_keyed(final, bounds, "final_obs")
