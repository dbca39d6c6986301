"""The game protocol's entity observations (PROTOCOL.md 7.6): the layout in a server's spaces, and a step's or a
reply's arrays, one a key or a head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tandem.protocol import framing
from tandem.protocol.errors import ProtocolError

MAX_GAME_KEYS = 64  # arrays of one entity game's step, or heads of its reply


def entities_field(name: str, value: Any) -> dict[str, Any]:
    """An entity game's layout (PROTOCOL.md 7.6): `types` [[name, features, bound], ...], `global` (features),
    `masks` (the mask keys a step may carry) and `heads` (each a map of name, kind, choices, actors, targets,
    slots)."""
    data = framing.string_map(name, value)
    for key in ("types", "global", "masks", "heads"):
        if key not in data:
            raise ProtocolError("required field is missing", f"{name}.{key}")
    types = data["types"]
    if not isinstance(types, list) or len(types) > MAX_GAME_KEYS:
        raise ProtocolError(f"must be a list of at most {MAX_GAME_KEYS} [name, features, bound]", f"{name}.types")
    for i, t in enumerate(types):
        if not isinstance(t, list) or len(t) != 3:
            raise ProtocolError("must be [name, features, bound]", f"{name}.types[{i}]")
        framing.string(f"{name}.types[{i}]", t[0])
        framing.count(f"{name}.types[{i}]", t[1])
        framing.count(f"{name}.types[{i}]", t[2])
    framing.count(f"{name}.global", data["global"])
    masks, heads = data["masks"], data["heads"]
    if not isinstance(masks, list) or not all(isinstance(m, str) for m in masks):
        raise ProtocolError("must be a list of key names", f"{name}.masks")
    if not isinstance(heads, list) or not 1 <= len(heads) <= MAX_GAME_KEYS:
        raise ProtocolError(f"must be a list of 1 to {MAX_GAME_KEYS} heads", f"{name}.heads")
    for i, head in enumerate(heads):
        where = f"{name}.heads[{i}]"
        head = framing.string_map(where, head)
        if {"name", "kind", "choices", "actors", "targets", "slots"} - set(head):
            raise ProtocolError("must have name, kind, choices, actors, targets and slots", where)
        framing.string(f"{where}.name", head["name"])
        framing.count(f"{where}.choices", head["choices"])
        framing.count(f"{where}.slots", head["slots"])
    return data


def keyed_arrays(arrays: dict[str, np.ndarray], name: str) -> np.ndarray | dict[str, np.ndarray]:
    """The one array `name`, or the arrays `name.KEY` (1 to MAX_GAME_KEYS, nothing else) as {KEY: array}."""
    if set(arrays) == {name}:
        return arrays[name]
    prefix = f"{name}."
    keys = {n[len(prefix) :]: a for n, a in arrays.items() if n.startswith(prefix) and len(n) > len(prefix)}
    if len(keys) != len(arrays) or not 1 <= len(keys) <= MAX_GAME_KEYS:
        raise ProtocolError(
            f"carries either the array {name!r} or 1 to {MAX_GAME_KEYS} arrays {prefix}KEY; got {sorted(arrays)}",
            "arrays",
        )
    return keys


def keyed_out(value: np.ndarray | Mapping[str, np.ndarray], name: str) -> list[tuple[str, np.ndarray]]:
    if isinstance(value, Mapping):
        return [(f"{name}.{key}", np.asarray(arr)) for key, arr in value.items()]
    return [(name, value)]
