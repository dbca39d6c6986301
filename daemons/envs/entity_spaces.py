"""Entity observations and actions: how an env declares them, and the fixed-shape form Tandem carries them in.

An env declares entity observations as a gymnasium `Dict` whose entity types are `Sequence(Box(shape=(F,)))`
(one row of F features per entity, any number of them each step), beside optional global features (a float `Box`
vector under `global`). Its action space is a `Dict` of heads: `PerEntity` (each entity of the acting types picks
one of `choices`), `SelectEntity` (each acting entity picks one entity of the target types) and `Discrete` (one
choice a step). Masks are optional keys of the observation: `mask:HEAD`, `actors:HEAD`, `targets:HEAD`.

Inside Tandem (actors, the wire, the learner) an observation has a fixed shape: each type padded to its bound N,
`TYPE` float32 [N, F], with `count:TYPE` int32 beside it; a head's acting slots are its actor types' padded rows
one type after another, in the order the head names them. Actions are one vector of slots (entity_actions.py). A
selected entity is named by its place among the step's present entities of the target types, in that order too.
An env with a plain vector observation and a Dict or Tuple of heads (hybrid actions) is carried the same way,
its observation as the global features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.entity_actions import (
    EntityActionSpace,
    Head,
    HybridActionSpace,
    PerEntity,
    SelectEntity,
    declared_head,
    entity_action_space,
    is_entity_policy,
)
from tandem.protocol.ragged import COUNT_PREFIX, MAX_BOUND

__all__ = ["EntityActionSpace", "Head", "HybridActionSpace", "PerEntity", "SelectEntity", "is_entity_policy"]

GLOBAL = "global"  # the global features' key
MASK, ACTORS, TARGETS = "mask:", "actors:", "targets:"  # the optional masks of a head, keys of the observation


@dataclass(frozen=True)
class EntityType:
    name: str
    features: int
    bound: int


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

    def action_space(self) -> EntityActionSpace | HybridActionSpace:
        return entity_action_space(self.heads)


def is_entity_declaration(env: gym.Env) -> bool:
    """An env that declares entities: a Dict observation with a Sequence key, an action space of several heads (a
    Dict or a Tuple: with a Box head beside Discrete ones, hybrid actions), or an env saying so
    (`declares_entities`, as EntityGym's adapter does)."""
    obs, act = env.observation_space, env.action_space
    if getattr(env.unwrapped, "declares_entities", False):
        return True
    if isinstance(obs, gym.spaces.Dict) and any(isinstance(s, gym.spaces.Sequence) for s in obs.values()):
        return True
    return isinstance(act, (gym.spaces.Dict, gym.spaces.Tuple))


def head_spaces(action_space: gym.Space) -> dict[str, gym.Space]:
    """A Dict's heads by name, a Tuple's by position ("0", "1", ...)."""
    if isinstance(action_space, gym.spaces.Tuple):
        return {str(i): sub for i, sub in enumerate(action_space.spaces)}
    if isinstance(action_space, gym.spaces.Dict):
        return dict(action_space.spaces)
    raise ValueError(f"an entity env's action space must be a Dict (or a Tuple) of heads, got {action_space}")


def declared_layout(obs_space: gym.Space, action_space: gym.Space, bound: int) -> EntityLayout:
    """The layout of an env that declares entity observations; ValueError naming what does not fit."""
    if not 1 <= bound <= MAX_BOUND:
        raise ValueError(f"env.max_entities must be in [1, {MAX_BOUND}], got {bound}")
    types, global_size, mask_keys = [], 0, []
    if isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1:  # composite actions of a plain env:
        obs_space = gym.spaces.Dict({GLOBAL: obs_space})  # its observation is the global features
    if not isinstance(obs_space, gym.spaces.Dict):
        raise ValueError(
            f"an env with entities or several action heads observes a Dict (or a 1-D Box), got {obs_space}"
        )
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
    names = {t.name for t in types}
    heads, offset = [], 0
    for name, sub in head_spaces(action_space).items():
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
        if head.kind == "select" and prefix == "mask":
            raise ValueError(
                f"observation key {key!r}: a SelectEntity head takes '{ACTORS}{name}' and '{TARGETS}{name}'"
            )
        if head.kind == "box":
            raise ValueError(f"observation key {key!r}: a Box head takes no mask")
    if not heads:
        raise ValueError("an entity env's action space needs at least one head")
    return EntityLayout(tuple(types), global_size, tuple(heads), tuple(mask_keys))


def padded_layout(obs_space: gym.Space, action_space: gym.Space) -> EntityLayout:
    """The layout of Tandem's fixed-shape entity spaces (what a learner or a saved policy has)."""
    if not is_entity_policy(action_space):
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


def layout_json(layout: EntityLayout) -> dict:
    """The layout as a game learns it in its welcome (PROTOCOL.md 7.6)."""
    return {
        "types": [[t.name, t.features, t.bound] for t in layout.types],
        "global": layout.global_size,
        "masks": list(layout.mask_keys),
        "heads": [head.to_json() for head in layout.heads],
    }
