"""Observations of several named arrays (a gymnasium Dict space): the few operations that treat them as one.

An observation batch is either one array or a dict of arrays, one per key, each with the same leading
dimensions; on the wire each key travels as its own array (`obs.KEY`, PROTOCOL.md 2.1.4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

MAX_KEYS = 64  # keys of one Dict observation a receiver accepts
ROW_NUMBER_DTYPES = ("torch.int64", "torch.int32")


def is_keyed(obs: Any) -> bool:
    return isinstance(obs, Mapping)


def map_obs(fn: Callable[[Any], Any], obs: Any) -> Any:
    """fn applied to the array, or to each key's array (the keys keep their order)."""
    return {key: fn(value) for key, value in obs.items()} if is_keyed(obs) else fn(obs)


def stack(items: Sequence[Any], axis: int = 0) -> Any:
    """np.stack of observations (or of observation batches), per key for keyed ones."""
    if items and is_keyed(items[0]):
        return {key: np.stack([item[key] for item in items], axis=axis) for key in items[0]}
    return np.stack(items, axis=axis)


def concat(parts: Sequence[Any], axis: int = 0) -> Any:
    """np.concatenate of observation batches, per key for keyed ones; parts that already lie side by side in one
    array, in order (stacks.unpack_side_by_side makes them so), are that array, not a copy of it."""
    if parts and is_keyed(parts[0]):
        return {key: np.concatenate([part[key] for part in parts], axis=axis) for key in parts[0]}
    whole = side_by_side(parts, axis)
    return whole if whole is not None else np.concatenate(parts, axis=axis)


def side_by_side(parts: Sequence[Any], axis: int) -> np.ndarray | None:
    """The array whose consecutive slices along `axis` the parts are, all of it, in order; else None."""
    base = getattr(parts[0], "base", None) if parts else None
    if not isinstance(base, np.ndarray) or any(getattr(p, "base", None) is not base for p in parts):
        return None
    if any(p.ndim != base.ndim for p in parts) or sum(p.shape[axis] for p in parts) != base.shape[axis]:
        return None
    address = base.__array_interface__["data"][0]
    for part in parts:
        same_form = part.shape[:axis] + part.shape[axis + 1 :] == base.shape[:axis] + base.shape[axis + 1 :]
        if not same_form or part.strides != base.strides or part.__array_interface__["data"][0] != address:
            return None
        address += part.shape[axis] * base.strides[axis]
    return base


def leading(obs: Any) -> tuple[int, ...]:
    """The shape of the first key's array (all keys share their leading dimensions), or of the array."""
    first = next(iter(obs.values())) if is_keyed(obs) else obs
    return tuple(first.shape)


def row_count(obs: Any) -> int:
    return leading(obs)[0]


def empty_rows(like: Any, rows: int) -> Any:
    """An uninitialised batch of `rows` observations shaped and typed like one row of `like` [B, ...]."""
    return map_obs(lambda a: np.empty((rows, *a.shape[1:]), a.dtype), like)


def describe(obs: Any, lead: int = 0) -> str:
    """'float32 [4]' or '{image: uint8 [7, 7, 3], direction: int64 []}' for messages (leading dims dropped)."""
    if is_keyed(obs):
        return "{" + ", ".join(f"{k}: {v.dtype} {list(v.shape[lead:])}" for k, v in obs.items()) + "}"
    return f"{obs.dtype} {list(obs.shape[lead:])}"


def as_keyed(obs: Mapping[str, Any], keys: Sequence[str]) -> dict[str, np.ndarray]:
    """An env's Dict observation as arrays in `keys`' order; ValueError naming a key that is missing."""
    missing = [key for key in keys if key not in obs]
    if missing:
        raise ValueError(f"the observation has no key {missing[0]!r} (keys: {', '.join(map(str, obs))})")
    return {key: np.asarray(obs[key]) for key in keys}


def put(target: Any, index: Any, value: Any) -> None:
    """target[index] = value, per key for keyed observations."""
    if is_keyed(target):
        for key, arr in target.items():
            arr[index] = value[key]
    else:
        target[index] = value


def take(obs: Any, index: Any) -> Any:
    """obs[index] for an array or a tensor, per key for keyed observations."""
    return map_obs(lambda a: take_rows(a, index), obs)


def take_rows(a: Any, index: Any) -> Any:
    """a[index]; rows of a tensor picked by a 1-D tensor of row numbers are gathered with index_select, which
    copies whole rows (advanced indexing gathers element by element: ten times slower for image rows on a CPU)."""
    if hasattr(a, "index_select") and is_row_numbers(index):
        return a.index_select(0, index)
    return a[index]


def is_row_numbers(index: Any) -> bool:
    """A 1-D torch tensor of integer row numbers (not a mask, not a numpy array)."""
    return hasattr(index, "index_select") and index.ndim == 1 and str(index.dtype) in ROW_NUMBER_DTYPES


def flat(obs: Any, lead: int = 2) -> Any:
    """The first `lead` dimensions merged into one (rows of [T, K, ...] as [T*K, ...]); arrays or tensors. The row
    count is given, not -1: an entity type with no features is [T, K, N, 0], which -1 cannot resolve."""
    return map_obs(lambda a: a.reshape(math.prod(a.shape[:lead]), *a.shape[lead:]), obs)


def nbytes(obs: Any) -> int:
    """Bytes of an observation batch, all keys together."""
    return sum(a.nbytes for a in obs.values()) if is_keyed(obs) else int(obs.nbytes)
