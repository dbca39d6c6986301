"""Action heads of an entity env (PerEntity, SelectEntity, Discrete, Box) and the one action vector they share.

A policy's action is one vector of slots: a Discrete head takes one slot, a PerEntity or SelectEntity head one
slot per padded actor row, a Box head one slot per dimension. With Discrete, PerEntity and SelectEntity heads
only it is an `EntityActionSpace` (a MultiDiscrete of int64 slots); with a Box head beside them (hybrid
discrete and continuous actions) a `HybridActionSpace` (a float32 Box, the choices of the other heads held
exactly as whole numbers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

KINDS = ("categorical", "select", "global", "box")
NON_FINITE = {"inf": np.inf, "-inf": -np.inf}  # JSON has no infinity: a Box head's bounds travel as strings


class PerEntity(gym.Space):
    """An action head: each entity of `actors` (one type or a list) picks one of `choices`."""

    def __init__(self, actors: str | Sequence[str], choices: int):
        super().__init__((), np.int64)
        self.actors = (actors,) if isinstance(actors, str) else tuple(actors)
        self.choices = int(choices)
        if not self.actors or self.choices < 1:
            raise ValueError(f"PerEntity needs at least one actor type and one choice, got {actors!r}, {choices!r}")

    def contains(self, x) -> bool:
        arr = np.asarray(x)
        return arr.ndim == 1 and bool(((arr >= -1) & (arr < self.choices)).all())

    def __repr__(self) -> str:
        return f"PerEntity(actors={list(self.actors)}, choices={self.choices})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PerEntity) and (other.actors, other.choices) == (self.actors, self.choices)


class SelectEntity(gym.Space):
    """An action head: each entity of `actors` picks one present entity of `targets` (its place among them)."""

    def __init__(self, actors: str | Sequence[str], targets: str | Sequence[str]):
        super().__init__((), np.int64)
        self.actors = (actors,) if isinstance(actors, str) else tuple(actors)
        self.targets = (targets,) if isinstance(targets, str) else tuple(targets)
        if not self.actors or not self.targets:
            raise ValueError(f"SelectEntity needs actor and target types, got {actors!r}, {targets!r}")

    def contains(self, x) -> bool:
        return np.asarray(x).ndim == 1

    def __repr__(self) -> str:
        return f"SelectEntity(actors={list(self.actors)}, targets={list(self.targets)})"

    def __eq__(self, other) -> bool:
        return isinstance(other, SelectEntity) and (other.actors, other.targets) == (self.actors, self.targets)


@dataclass(frozen=True)
class Head:
    """One action head: its slots in the action vector are [offset, offset + slots)."""

    name: str
    kind: str  # one of KINDS
    choices: int  # categorical and global: choices; select: target rows (the targets' bounds together)
    actors: tuple[str, ...]
    targets: tuple[str, ...]
    slots: int
    offset: int
    low: tuple[float, ...] = ()  # a Box head's bounds, one a dimension
    high: tuple[float, ...] = ()

    def to_json(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "choices": self.choices, "actors": list(self.actors),
               "targets": list(self.targets), "slots": self.slots}  # fmt: skip
        if self.kind == "box":
            out["low"], out["high"] = [bound_json(v) for v in self.low], [bound_json(v) for v in self.high]
        return out


def bound_json(value: float) -> float | str:
    return value if np.isfinite(value) else str(value)


class EntityActionSpace(gym.spaces.MultiDiscrete):
    """The action vector of an entity policy: a MultiDiscrete of slots, with the heads that lay them out."""

    def __init__(self, heads: Sequence[Head]):
        nvec = [h.choices for h in heads for _ in range(h.slots)]
        super().__init__(np.asarray(nvec, np.int64))
        self.heads = tuple(heads)


class HybridActionSpace(gym.spaces.Box):
    """The action vector of an entity policy with a Box head: float32 slots, each bounded as its head says (a
    discrete head's slot by [0, choices - 1], so the env step's clip to the bounds leaves its choice as it is)."""

    def __init__(self, heads: Sequence[Head]):
        low, high = [], []
        for h in heads:
            if h.kind == "box":
                low += list(h.low)
                high += list(h.high)
            else:
                low += [0.0] * h.slots
                high += [float(h.choices - 1)] * h.slots
        super().__init__(np.asarray(low, np.float32), np.asarray(high, np.float32), dtype=np.float32)
        self.heads = tuple(heads)


def entity_action_space(heads: Sequence[Head]) -> EntityActionSpace | HybridActionSpace:
    return HybridActionSpace(heads) if any(h.kind == "box" for h in heads) else EntityActionSpace(heads)


def is_entity_policy(action_space: gym.Space) -> bool:
    """A policy over Tandem's fixed-shape entity spaces (its action space lays out entity heads)."""
    return isinstance(action_space, (EntityActionSpace, HybridActionSpace))


def declared_head(name: str, sub: gym.Space, types: set[str], bounds: dict[str, int], offset: int) -> Head:
    if ":" in name:
        raise ValueError(f"action head {name!r}: a head's name may not hold ':'")
    if isinstance(sub, gym.spaces.Discrete):
        if int(sub.start) != 0:
            raise ValueError(f"action head {name!r}: a Discrete head must start at 0, got start {sub.start}")
        return Head(name, "global", int(sub.n), (), (), 1, offset)
    if isinstance(sub, gym.spaces.Box) and np.issubdtype(sub.dtype, np.floating) and len(sub.shape) == 1:
        low, high = tuple(float(v) for v in sub.low), tuple(float(v) for v in sub.high)
        return Head(name, "box", int(sub.shape[0]), (), (), int(sub.shape[0]), offset, low, high)
    if not isinstance(sub, (PerEntity, SelectEntity)):
        raise ValueError(
            f"action head {name!r} is {sub}: a head is a PerEntity, a SelectEntity, a Discrete or a 1-D float Box"
        )
    for t in (*sub.actors, *getattr(sub, "targets", ())):
        if t not in types:
            raise ValueError(f"action head {name!r} names entity type {t!r}, which the observation does not have")
    slots = sum(bounds[t] for t in sub.actors)
    if isinstance(sub, PerEntity):
        return Head(name, "categorical", sub.choices, sub.actors, (), slots, offset)
    return Head(name, "select", sum(bounds[t] for t in sub.targets), sub.actors, sub.targets, slots, offset)


def heads_from_json(items: Sequence[dict]) -> list[Head]:
    """Heads as `Head.to_json` wrote them (a saved policy's action space), laid out one after another again."""
    heads, offset = [], 0
    for item in items:
        if item["kind"] not in KINDS:
            raise ValueError(f"head kind {item['kind']!r} is not one of {', '.join(KINDS)}")
        low = tuple(NON_FINITE.get(v, v) for v in item.get("low", ()))
        high = tuple(NON_FINITE.get(v, v) for v in item.get("high", ()))
        heads.append(Head(str(item["name"]), item["kind"], int(item["choices"]), tuple(item["actors"]),
                          tuple(item["targets"]), int(item["slots"]), offset, low, high))  # fmt: skip
        offset += heads[-1].slots
    return heads
