"""Entity observations and actions: how an env declares them, and the fixed-shape form Tandem carries them in.

An env declares entity observations as a gymnasium `Dict` whose entity types are `Sequence(Box(shape=(F,)))`
(one row of F features per entity, any number of them each step), beside optional global features (a float `Box`
vector under `global`). Its action space is a `Dict` of heads: `PerEntity` (each entity of the acting types picks
one of `choices`), `SelectEntity` (each acting entity picks one entity of the target types) and `Discrete` (one
choice a step). Masks are optional keys of the observation: `mask:HEAD`, `actors:HEAD`, `targets:HEAD`.

Inside Tandem (actors, the wire, the learner) an observation has a fixed shape: each type padded to its bound N,
`TYPE` float32 [N, F], with `count:TYPE` int32 beside it; a head's acting slots are its actor types' padded rows
one type after another. Actions are one int64 vector of slots (an `EntityActionSpace`, a MultiDiscrete): a
global head takes one slot, a per-entity head one slot per padded actor row. A selected entity is named by its
place among the step's present entities of the target types, in type order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from tandem.protocol.ragged import COUNT_PREFIX, MAX_BOUND

GLOBAL = "global"  # the global features' key
MASK, ACTORS, TARGETS = "mask:", "actors:", "targets:"  # the optional masks of a head, keys of the observation
KINDS = ("categorical", "select", "global")


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
class EntityType:
    name: str
    features: int
    bound: int


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

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "choices": self.choices, "actors": list(self.actors),
                "targets": list(self.targets), "slots": self.slots}  # fmt: skip


class EntityActionSpace(gym.spaces.MultiDiscrete):
    """The action vector of an entity policy: a MultiDiscrete of slots, with the heads that lay them out."""

    def __init__(self, heads: Sequence[Head]):
        nvec = [h.choices for h in heads for _ in range(h.slots)]
        super().__init__(np.asarray(nvec, np.int64))
        self.heads = tuple(heads)


@dataclass(frozen=True)
class EntityLayout:
    """Entity types, global features and heads of one entity env, and the fixed-shape spaces they give."""

    types: tuple[EntityType, ...]
    global_size: int
    heads: tuple[Head, ...]
    mask_keys: tuple[str, ...]  # the `mask:`, `actors:` and `targets:` keys the env gives

    def type(self, name: str) -> EntityType:
        return next(t for t in self.types if t.name == name)

    def rows(self, types: Sequence[str]) -> int:
        """Padded rows of `types` one after another: a head's slots or target rows."""
        return sum(self.type(name).bound for name in types)

    def observation_space(self) -> gym.spaces.Dict:
        spaces: dict[str, gym.Space] = {}
        for t in self.types:
            spaces[t.name] = gym.spaces.Box(-np.inf, np.inf, (t.bound, t.features), np.float32)
            spaces[f"{COUNT_PREFIX}{t.name}"] = gym.spaces.Box(0, t.bound, (), np.int32)
        if self.global_size:
            spaces[GLOBAL] = gym.spaces.Box(-np.inf, np.inf, (self.global_size,), np.float32)
        for key in self.mask_keys:
            spaces[key] = gym.spaces.MultiBinary(self.mask_shape(key))
        return gym.spaces.Dict(spaces)

    def mask_shape(self, key: str) -> tuple[int, ...]:
        prefix, name = key.split(":", 1)
        head = next(h for h in self.heads if h.name == name)
        if prefix + ":" == MASK:
            return (head.choices,) if head.kind == "global" else (head.slots, head.choices)
        return (head.slots,) if prefix + ":" == ACTORS else (head.choices,)

    def action_space(self) -> EntityActionSpace:
        return EntityActionSpace(self.heads)


def is_entity_declaration(env: gym.Env) -> bool:
    """An env that declares entities: a Dict observation with a Sequence key, a Dict action space with a PerEntity
    or SelectEntity head, or an env saying so (`declares_entities`, as EntityGym's adapter does)."""
    obs, act = env.observation_space, env.action_space
    if getattr(env.unwrapped, "declares_entities", False):
        return True
    if isinstance(obs, gym.spaces.Dict) and any(isinstance(s, gym.spaces.Sequence) for s in obs.values()):
        return True
    return isinstance(act, gym.spaces.Dict) and any(isinstance(s, (PerEntity, SelectEntity)) for s in act.values())


def is_entity_policy(action_space: gym.Space) -> bool:
    """A policy over Tandem's fixed-shape entity spaces (its action space lays out entity heads)."""
    return isinstance(action_space, EntityActionSpace)


def declared_layout(obs_space: gym.Space, action_space: gym.Space, bound: int) -> EntityLayout:
    """The layout of an env that declares entity observations; ValueError naming what does not fit."""
    if not 1 <= bound <= MAX_BOUND:
        raise ValueError(f"env.max_entities must be in [1, {MAX_BOUND}], got {bound}")
    types, global_size, mask_keys = [], 0, []
    for key, sub in obs_space.spaces.items():
        if key.startswith((MASK, ACTORS, TARGETS)):
            mask_keys.append(key)
        elif isinstance(sub, gym.spaces.Sequence):
            inner = sub.feature_space
            if not isinstance(inner, gym.spaces.Box) or len(inner.shape) != 1:
                raise ValueError(f"entity type {key!r} must be a Sequence of 1-D Box rows (its features), got {sub}")
            if ":" in key:
                raise ValueError(f"entity type {key!r}: a type's name may not hold ':' (it is kept for masks)")
            types.append(EntityType(key, int(inner.shape[0]), bound))
        elif key == GLOBAL:
            if not isinstance(sub, gym.spaces.Box) or len(sub.shape) != 1:
                raise ValueError(f"observation key 'global' must be a 1-D Box of global features, got {sub}")
            global_size = int(sub.shape[0])
        else:
            raise ValueError(
                f"observation key {key!r}: an entity observation holds entity types (Sequence of Box), 'global' "
                f"(a Box) and masks ('{MASK}HEAD', '{ACTORS}HEAD', '{TARGETS}HEAD'), nothing else"
            )
    if not isinstance(action_space, gym.spaces.Dict):
        raise ValueError(f"an entity env's action space must be a Dict of heads, got {action_space}")
    names = {t.name for t in types}
    heads, offset = [], 0
    for name, sub in action_space.spaces.items():
        head = declared_head(name, sub, names, {t.name: t.bound for t in types}, offset)
        heads.append(head)
        offset += head.slots
    head_names = {h.name: h for h in heads}
    for key in mask_keys:
        prefix, name = key.split(":", 1)
        head = head_names.get(name)
        if head is None:
            raise ValueError(f"observation key {key!r} names no action head (heads: {', '.join(head_names)})")
        if head.kind == "global" and prefix != "mask":
            raise ValueError(f"observation key {key!r}: a global head takes only '{MASK}{name}'")
        if head.kind == "categorical" and prefix == "targets":
            raise ValueError(f"observation key {key!r}: a PerEntity head has no targets")
    if not heads:
        raise ValueError("an entity env's action space needs at least one head")
    return EntityLayout(tuple(types), global_size, tuple(heads), tuple(mask_keys))


def declared_head(name: str, sub: gym.Space, types: set[str], bounds: dict[str, int], offset: int) -> Head:
    if ":" in name:
        raise ValueError(f"action head {name!r}: a head's name may not hold ':'")
    if isinstance(sub, gym.spaces.Discrete):
        if int(sub.start) != 0:
            raise ValueError(f"action head {name!r}: a Discrete head must start at 0, got start {sub.start}")
        return Head(name, "global", int(sub.n), (), (), 1, offset)
    if not isinstance(sub, (PerEntity, SelectEntity)):
        raise ValueError(f"action head {name!r} is {sub}: a head is a PerEntity, a SelectEntity or a Discrete")
    for t in (*sub.actors, *getattr(sub, "targets", ())):
        if t not in types:
            raise ValueError(f"action head {name!r} names entity type {t!r}, which the observation does not have")
    slots = sum(bounds[t] for t in sub.actors)
    if isinstance(sub, PerEntity):
        return Head(name, "categorical", sub.choices, sub.actors, (), slots, offset)
    return Head(name, "select", sum(bounds[t] for t in sub.targets), sub.actors, sub.targets, slots, offset)


def padded_layout(obs_space: gym.Space, action_space: gym.Space) -> EntityLayout:
    """The layout of Tandem's fixed-shape entity spaces (what a learner or a saved policy has)."""
    if not isinstance(action_space, EntityActionSpace):
        raise ValueError(f"entity observations need the entity action space their env gave, got {action_space}")
    types, global_size, mask_keys = [], 0, []
    for key, sub in obs_space.spaces.items():
        if f"{COUNT_PREFIX}{key}" in obs_space.spaces:
            types.append(EntityType(key, int(sub.shape[1]), int(sub.shape[0])))
        elif key == GLOBAL:
            global_size = int(sub.shape[0])
        elif key.startswith((MASK, ACTORS, TARGETS)):
            mask_keys.append(key)
    return EntityLayout(tuple(types), global_size, action_space.heads, tuple(mask_keys))


def heads_from_json(items: Sequence[dict]) -> list[Head]:
    """Heads as `Head.to_json` wrote them (a saved policy's action space), laid out one after another again."""
    heads, offset = [], 0
    for item in items:
        if item["kind"] not in KINDS:
            raise ValueError(f"head kind {item['kind']!r} is not one of {', '.join(KINDS)}")
        heads.append(Head(str(item["name"]), item["kind"], int(item["choices"]), tuple(item["actors"]),
                          tuple(item["targets"]), int(item["slots"]), offset))  # fmt: skip
        offset += heads[-1].slots
    return heads


def layout_json(layout: EntityLayout) -> dict:
    """The layout as a game learns it in its welcome (PROTOCOL.md 7.6)."""
    return {
        "types": [[t.name, t.features, t.bound] for t in layout.types],
        "global": layout.global_size,
        "masks": list(layout.mask_keys),
        "heads": [head.to_json() for head in layout.heads],
    }
