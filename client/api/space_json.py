"""Gymnasium spaces as plain JSON and back, so an exported policy needs neither its env nor pickle."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.entity_actions import entity_action_space, heads_from_json, is_entity_policy

NON_FINITE = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}  # JSON has no infinity: these travel as strings


def bound_to_json(values: np.ndarray) -> Any:
    """A Box bound: one number when every entry is the same (the usual case, and small), else a nested list."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    as_json = [v if np.isfinite(v) else str(v) for v in flat.tolist()]  # "inf", "-inf", "nan"
    if flat.size and all(v == as_json[0] for v in as_json):
        return as_json[0]
    return np.asarray(as_json, dtype=object).reshape(np.shape(values)).tolist()


def bound_from_json(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    def number(v: Any) -> float:
        return NON_FINITE[v] if isinstance(v, str) else float(v)

    if isinstance(value, list):
        array = np.vectorize(number, otypes=[np.float64])(np.asarray(value, dtype=object))
    else:
        array = np.full(shape, number(value))
    return array.astype(dtype)


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A JSON-ready dict for Box, Discrete, MultiDiscrete and MultiBinary; ValueError for any other space."""
    if is_entity_policy(space):  # heads laying out slots (docs/guides/entities.md): told apart from Box, MultiDiscrete
        return {"type": "EntityActions", "heads": [head.to_json() for head in space.heads]}
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": bound_to_json(space.low),
            "high": bound_to_json(space.high),
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "items": [space_to_json(sub) for sub in space.spaces]}
    if isinstance(space, gym.spaces.Dict):  # the keys in order, as the network encodes them
        return {"type": "Dict", "keys": [[key, space_to_json(sub)] for key, sub in space.spaces.items()]}
    raise ValueError(
        f"cannot describe the space {space} in JSON (Box, Discrete, MultiDiscrete, MultiBinary, Tuple and Dict can be)"
    )


def space_from_json(data: dict[str, Any]) -> gym.Space:
    """The space `space_to_json` described; ValueError naming what is missing or unknown."""
    try:
        kind = data["type"]
        if kind == "Box":
            shape, dtype = tuple(int(n) for n in data["shape"]), np.dtype(data["dtype"])
            return gym.spaces.Box(
                bound_from_json(data["low"], shape, dtype), bound_from_json(data["high"], shape, dtype), shape, dtype
            )
        if kind == "Discrete":
            return gym.spaces.Discrete(int(data["n"]), start=int(data["start"]))
        if kind == "MultiDiscrete":
            return gym.spaces.MultiDiscrete(
                np.asarray(data["nvec"]), dtype=np.dtype(data["dtype"]), start=np.asarray(data["start"])
            )
        if kind == "MultiBinary":
            return gym.spaces.MultiBinary(data["n"])
        if kind == "EntityActions":
            return entity_action_space(heads_from_json(data["heads"]))
        if kind == "Tuple":
            return gym.spaces.Tuple([space_from_json(sub) for sub in data["items"]])
        if kind == "Dict":
            return gym.spaces.Dict({str(key): space_from_json(sub) for key, sub in data["keys"]})
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"space description {data!r} is incomplete: {exc}") from exc
    raise ValueError(
        f"space type {kind!r} is not one of Box, Discrete, MultiDiscrete, MultiBinary, Tuple, Dict, EntityActions"
    )
