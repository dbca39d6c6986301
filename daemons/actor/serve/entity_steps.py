"""An entity game's step (PROTOCOL.md 7.6) checked and padded as the policy takes it."""

from __future__ import annotations

import numpy as np

from tandem.daemons.envs.entity_rows import EntityRows
from tandem.daemons.envs.entity_spaces import GLOBAL


def checked_entities(rows: EntityRows, obs: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The observation padded; ValueError naming the key that does not fit (the server answers it bad_obs): a key
    the layout has not or one missing, a type's rows of another width or over its bound, a float other than
    float32, NaN or infinity, a mask of the wrong rows."""
    layout = rows.layout
    if not isinstance(obs, dict):
        raise ValueError("an entity game's obs is one array a key (obs.TYPE, obs.global, masks)")
    known = {t.name for t in layout.types} | set(layout.mask_keys) | ({GLOBAL} if layout.global_size else set())
    unknown = sorted(set(obs) - known)
    if unknown:
        raise ValueError(f"obs.{unknown[0]} is not a key of this server's observation ({', '.join(sorted(known))})")
    missing = sorted(k for k in known - set(layout.mask_keys) if k not in obs)
    if missing:
        raise ValueError(f"obs.{missing[0]} is missing (a type with no entities sends [0, F] rows)")
    for key, arr in obs.items():
        if key in layout.mask_keys:
            if arr.dtype.str not in ("|b1", "|u1"):
                raise ValueError(f"obs.{key} must be bool or uint8, got {arr.dtype.str}")
            continue
        if arr.dtype.str != "<f4":
            raise ValueError(f"obs.{key} must be <f4, got {arr.dtype.str}")
        if not np.isfinite(arr).all():
            raise ValueError(f"obs.{key} holds NaN or infinite values")
    for t in layout.types:
        arr = obs[t.name]
        if arr.ndim != 2 or arr.shape[1] != t.features:
            raise ValueError(f"obs.{t.name} must be [n, {t.features}] (a row per entity), got {list(arr.shape)}")
    return rows.pad(obs)  # ValueError: more entities than the bound, a mask of the wrong rows, a global's size
