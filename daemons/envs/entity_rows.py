"""One entity env's observations padded to their bounds and its slot actions back in its own form (no gym here).

`EntityRows` is what both an `EntityEnv` (an env Tandem steps) and an action server (a game's observations arrive
over the game protocol) use: `pad` an observation as the env made it, then `env_action` the policy's slots for
that same observation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tandem.daemons.envs.entity_spaces import ACTORS, GLOBAL, MASK, TARGETS, EntityLayout, Head
from tandem.protocol.ragged import COUNT_PREFIX

NO_ACTION = -1  # what an env gets for an entity that does not act this step (masked out, or nothing to select)


class EntityRows:
    """Pads each entity type to its bound (with its count), places the masks in their heads' slots, and turns the
    policy's slots into one action per head: an int for a Discrete head, an int64 array with one entry per
    present actor entity (NO_ACTION where it does not act) for a PerEntity or SelectEntity head. It remembers
    the counts and masks of the last observation it padded: `env_action` answers that one."""

    def __init__(self, layout: EntityLayout, as_tuple: bool = False):
        self.layout, self.as_tuple = layout, as_tuple  # as_tuple: the env's actions are a Tuple, heads "0", "1", ...
        self.counts: dict[str, int] = {}
        self.masks: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ observations

    def pad(self, obs: Any) -> dict[str, np.ndarray]:
        if not isinstance(obs, Mapping):  # a plain env with several action heads: its observation is the global one
            obs = {GLOBAL: obs}
        out: dict[str, np.ndarray] = {}
        self.counts = {}
        for t in self.layout.types:
            rows = np.asarray(obs.get(t.name, ()), np.float32)
            rows = rows.reshape(len(rows) if rows.ndim else 0, t.features)  # (F = 0: a type with no features)
            if len(rows) > t.bound:
                raise ValueError(
                    f"entity type {t.name!r}: {len(rows)} entities in one observation, more than "
                    f"env.max_entities = {t.bound}; raise env.max_entities"
                )
            padded = np.zeros((t.bound, t.features), np.float32)
            padded[: len(rows)] = rows
            out[t.name], out[f"{COUNT_PREFIX}{t.name}"] = padded, np.array(len(rows), np.int32)
            self.counts[t.name] = len(rows)
        if self.layout.global_size:
            features = np.asarray(obs[GLOBAL], np.float32).reshape(-1)
            if features.size != self.layout.global_size:
                raise ValueError(f"'global' must hold {self.layout.global_size} features, got {features.size}")
            out[GLOBAL] = features
        for key in self.layout.mask_keys:
            out[key] = self.padded_mask(key, obs.get(key))
        self.remember(out)  # the actions of this step are taken under its counts and masks
        return out

    def remember(self, padded: dict[str, np.ndarray]) -> None:
        """Take the counts and masks of `padded` (an observation `pad` made) as those `env_action` answers."""
        self.counts = {t.name: int(padded[f"{COUNT_PREFIX}{t.name}"]) for t in self.layout.types}
        self.masks = {key: padded[key] for key in self.layout.mask_keys}

    def slot_rows(self, types: tuple[str, ...]) -> np.ndarray:
        """The padded rows (slots) of the present entities of `types`, in type order."""
        rows, start = [], 0
        for name in types:
            rows.append(np.arange(start, start + self.counts[name]))
            start += self.layout.type(name).bound
        return np.concatenate(rows) if rows else np.zeros(0, np.int64)

    def padded_mask(self, key: str, given: Any) -> np.ndarray:
        """A mask as the env gave it (rows for its present entities only) in its head's padded slots; everything
        allowed where the env gave none this step."""
        prefix, name = key.split(":", 1)
        head = next(h for h in self.layout.heads if h.name == name)
        shape = self.layout.mask_shape(key)
        out = np.ones(shape, np.int8)
        if given is None:
            return out
        given = np.asarray(given, bool)
        if prefix + ":" == MASK and head.kind == "global":
            out[:] = given.reshape(shape)
            return out
        rows = self.slot_rows(head.targets if prefix + ":" == TARGETS else head.actors)
        expected = (len(rows), *shape[1:])
        if given.shape != expected:
            raise ValueError(f"observation key {key!r} must be {list(expected)} (one row per present entity), "
                             f"got {list(given.shape)}")  # fmt: skip
        out[rows] = given
        return out

    # ------------------------------------------------------------------ actions

    def env_action(self, action: np.ndarray, padded: dict[str, np.ndarray] | None = None) -> Any:
        """One action per head for the last padded observation (or for `padded`, one `pad` made): a dict, or a
        tuple for an env whose action space is a Tuple."""
        if padded is not None:
            self.remember(padded)
        out: dict[str, Any] = {}
        for head in self.layout.heads:
            slots = action[head.offset : head.offset + head.slots]
            if head.kind == "global":
                out[head.name] = int(slots[0])
                continue
            if head.kind == "box":
                out[head.name] = np.asarray(slots, np.float32)
                continue
            rows = self.slot_rows(head.actors)
            chosen = slots[rows].astype(np.int64)
            acting = self.acting(head, rows)
            chosen[~acting] = NO_ACTION
            out[head.name] = chosen
        return tuple(out.values()) if self.as_tuple else out

    def acting(self, head: Head, rows: np.ndarray) -> np.ndarray:
        """Which present actors act: those the actors mask allows, and for a select head only while there is a
        target to pick (the policy forces the others to slot value 0, which means nothing to the env)."""
        acting = np.ones(len(rows), bool)
        last = self.masks
        if f"{ACTORS}{head.name}" in last:
            acting &= last[f"{ACTORS}{head.name}"][rows].astype(bool)
        if head.kind == "categorical" and f"{MASK}{head.name}" in last:  # no choice left: it does not act
            acting &= last[f"{MASK}{head.name}"][rows].astype(bool).any(-1)
        if head.kind == "select":
            targets = self.slot_rows(head.targets)
            if f"{TARGETS}{head.name}" in last:
                targets = targets[last[f"{TARGETS}{head.name}"][targets].astype(bool)]
            acting &= len(targets) > 0
        return acting
