"""EntityGym environments (PyPI `entity-gym`) as gymnasium envs declaring entity spaces: `env.id = "entitygym/NAME"`.

NAME is one of `entity_gym.examples.ENV_REGISTRY` (CherryPick, Xor, ...) or 'module:Class' naming an
`entity_gym.env.Environment` of your own; `env.kwargs` go to its constructor. Every action head may be taken
by any entity (EntityGym's actors and actees are chosen per step, by ids or types), so each head acts for all
types, and the step's `actor_ids`/`actor_types`, `actee_ids`/`actee_types` and masks become `actors:`,
`targets:` and `mask:` keys. An entity the step hides from the policy (`visible`) is left out of the observation.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.entity_env import NO_ACTION
from tandem.daemons.envs.entity_spaces import ACTORS, GLOBAL, MASK, TARGETS, PerEntity, SelectEntity

PREFIX = "entitygym/"
INSTALL_HINT = (
    "install it with `pip install --no-deps --ignore-requires-python entity-gym==0.1.10 ragged-buffer==0.4.8 "
    "msgpack-numpy tqdm` (its metadata asks for Python < 3.11, but it runs on 3.11; `make test` installs it so)"
)


def import_entity_gym() -> Any:
    """entity_gym.env and entity_gym.examples; entity-gym 0.1.10 names np.bool8, which NumPy 2 removed."""
    if not hasattr(np, "bool8"):
        np.bool8 = np.bool_  # the alias it was; entity-gym only uses it in annotations and isinstance checks
    try:
        return importlib.import_module("entity_gym.env"), importlib.import_module("entity_gym.examples")
    except ImportError as exc:
        raise ImportError(f"env.id {PREFIX}...: entity-gym does not import ({exc}); {INSTALL_HINT}") from exc


def environment_class(name: str) -> type:
    _, examples = import_entity_gym()
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)
    if name not in examples.ENV_REGISTRY:
        raise ValueError(
            f"env.id {PREFIX}{name}: no such EntityGym example; one of {', '.join(sorted(examples.ENV_REGISTRY))}, "
            "or 'module:Class' naming an entity_gym Environment"
        )
    return examples.ENV_REGISTRY[name]


class EntityGymEnv(gym.Env):
    """One EntityGym Environment as a gymnasium env whose observations are entity types, global features and the
    masks of each step; EntityGym's `done` ends an episode as terminated."""

    declares_entities = True  # padded by EntityEnv even when it has global features only (MultiArmedBandit)

    def __init__(self, name: str, **kwargs: Any):
        self.eg, _ = import_entity_gym()
        self.env = environment_class(name)(**kwargs)
        space = self.env.obs_space()
        self.types = {t: len(entity.features) for t, entity in space.entities.items()}
        self.global_size = len(space.global_features)
        obs: dict[str, gym.Space] = {
            t: gym.spaces.Sequence(gym.spaces.Box(-np.inf, np.inf, (f,), np.float32), stack=True)
            for t, f in self.types.items()
        }
        if self.global_size:
            obs[GLOBAL] = gym.spaces.Box(-np.inf, np.inf, (self.global_size,), np.float32)
        actions: dict[str, gym.Space] = {}
        self.heads = dict(self.env.action_space())
        every = tuple(self.types)
        for name, head in self.heads.items():
            if isinstance(head, self.eg.GlobalCategoricalActionSpace):
                actions[name] = gym.spaces.Discrete(len(head.index_to_label))
                obs[f"{MASK}{name}"] = gym.spaces.MultiBinary(len(head.index_to_label))
            elif isinstance(head, self.eg.CategoricalActionSpace):
                actions[name] = PerEntity(every, len(head.index_to_label))
                obs[f"{ACTORS}{name}"] = obs[f"{MASK}{name}"] = gym.spaces.Sequence(gym.spaces.MultiBinary(1))
            else:
                actions[name] = SelectEntity(every, every)
                obs[f"{ACTORS}{name}"] = obs[f"{TARGETS}{name}"] = gym.spaces.Sequence(gym.spaces.MultiBinary(1))
        self.observation_space = gym.spaces.Dict(obs)
        self.action_space = gym.spaces.Dict(actions)
        self.last: Any = None  # the step the policy acts on, and (take) what its masks and actions refer to
        self.seen: dict[str, np.ndarray] = {}
        self.ids: list[Any] = []
        self.index: dict[Any, int] = {}

    def reset(self, *, seed: int | None = None, options: Any = None):
        if seed is not None:  # EntityGym's examples draw from the global generators
            random.seed(seed)
            np.random.seed(seed % 2**32)
        return self.observe(self.env.reset()), {}

    def step(self, action: dict[str, Any]):
        obs = self.env.act(self.eg_actions(action))
        return self.observe(obs), float(obs.reward), bool(obs.done), False, {}

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ observations

    def take(self, obs: Any) -> None:
        """Hold `obs` as the step the policy acts on, with what every mask and action refers to, worked out once:
        which entities of each type it may see, their ids in type order, and each id's place."""
        self.last = obs
        self.seen = {t: visible(obs, t) for t in self.types}
        self.ids = []
        for t, seen in self.seen.items():
            given = obs.ids.get(t)
            self.ids.extend(eid for eid, keep in zip(given if given is not None else [None] * len(seen), seen) if keep)
        self.index = {eid: i for i, eid in enumerate(self.ids)}

    def type_rows(self, types: Any) -> np.ndarray:
        """Which of the step's visible entities (in type order) are of `types`."""
        return np.concatenate([np.full(int(seen.sum()), t in types) for t, seen in self.seen.items()]).astype(bool)

    def chosen(self, ids: Any, types: Any) -> np.ndarray:
        """[entities] bool: the entities named by ids, or of types, or all of them when neither is given."""
        if ids is not None:
            out = np.zeros(len(self.ids), bool)
            out[[self.index[eid] for eid in ids if eid in self.index]] = True
            return out
        if types is not None:
            return self.type_rows(set(types))
        return np.ones(len(self.ids), bool)

    def mask_rows(self, mask: Any, actors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The entity rows a mask's rows belong to (actor_ids' order where the step names ids, else entity order),
        and which of the mask's rows those are (an actor the policy cannot see has none)."""
        if mask.actor_ids is None:
            rows = np.flatnonzero(actors)
            return rows, np.ones(len(rows), bool)
        keep = np.array([eid in self.index for eid in mask.actor_ids], bool)
        return np.array([self.index[eid] for eid in mask.actor_ids if eid in self.index], np.int64), keep

    def observe(self, obs: Any) -> dict[str, np.ndarray]:
        self.take(obs)
        out: dict[str, np.ndarray] = {}
        for t, f in self.types.items():
            feats = obs.features.get(t)
            rows = np.asarray(feats if feats is not None and len(feats) else np.zeros((0, f)), np.float32)
            out[t] = rows.reshape(len(rows), f)[self.seen[t]]
        if self.global_size:
            out[GLOBAL] = np.asarray(obs.global_features, np.float32)
        for name, head in self.heads.items():
            mask = obs.actions.get(name)
            if isinstance(head, self.eg.GlobalCategoricalActionSpace):
                if mask is not None and mask.mask is not None:
                    out[f"{MASK}{name}"] = np.asarray(mask.mask, bool)
                continue
            actors = np.zeros(len(self.ids), bool) if mask is None else self.chosen(mask.actor_ids, mask.actor_types)
            out[f"{ACTORS}{name}"] = actors
            if isinstance(head, self.eg.CategoricalActionSpace):
                full = np.ones((len(actors), len(head.index_to_label)), bool)
                if mask is not None and mask.mask is not None:
                    given = np.asarray(mask.mask, bool).reshape(-1, len(head.index_to_label))
                    rows, keep = self.mask_rows(mask, actors)
                    full[rows] = given[keep]  # the mask's rows follow actor_ids' order
                out[f"{MASK}{name}"] = full
            else:
                targets = np.zeros(len(actors), bool) if mask is None else self.chosen(mask.actee_ids, mask.actee_types)
                out[f"{TARGETS}{name}"] = targets
        return out

    # ------------------------------------------------------------------ actions

    def eg_actions(self, action: dict[str, Any]) -> dict[str, Any]:
        obs, eg, ids = self.last, self.eg, self.ids
        out: dict[str, Any] = {}
        for name, head in self.heads.items():
            if name not in obs.actions:
                continue
            value = action[name]
            if isinstance(head, eg.GlobalCategoricalActionSpace):
                out[name] = eg.GlobalCategoricalAction(int(value), head.index_to_label[int(value)])
                continue
            value = np.asarray(value)
            acting = np.flatnonzero(value != NO_ACTION)
            if isinstance(head, eg.CategoricalActionSpace):
                out[name] = eg.CategoricalAction(
                    actors=[ids[i] for i in acting], indices=value[acting].astype(np.int64),
                    index_to_label=head.index_to_label,
                )  # fmt: skip
            else:
                # a value is the actee's place among all of the step's entities (the head targets every type)
                out[name] = eg.SelectEntityAction(
                    actors=[ids[i] for i in acting], actees=[ids[int(v)] for v in value[acting]]
                )
        return out


def visible(obs: Any, t: str) -> np.ndarray:
    """Which entities of type t the policy may see (EntityGym's `visible`; all where it says nothing). A hidden
    entity is left out altogether: Tandem's value function sees what its policy sees."""
    feats = obs.features.get(t)
    n = 0 if feats is None else len(feats)
    given = obs.visible.get(t)
    return np.ones(n, bool) if given is None else np.asarray(given, bool).reshape(n)
