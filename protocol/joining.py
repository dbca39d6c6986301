"""Consecutive unrolls of one stream joined into one message, frame-stacked ones (PROTOCOL.md 2.1.2) included."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tandem.protocol.stacks import continues, frame_words, same_memory
from tandem.protocol.transitions import TransitionBatch


def joinable(first: TransitionBatch, second: TransitionBatch) -> bool:
    """True if `second` continues `first` on one stream: same policy, actor, incarnation, version and envs, the
    next `seq`, the same extras, and `second.obs[0]` is `first.obs[T]` (the one-row overlap of section 2.1).

    Frame-stacked batches (same `obs_stack`) also need `second.obs_history` to be the older frames of
    `first.obs[T]`'s stacks: then the joined batch, which keeps only `first`'s history, rebuilds both."""
    if first.keyed or second.keyed:  # Dict observations are for on-policy learners, which take unrolls one by one
        return False
    return (
        first.policy_id == second.policy_id
        and first.actor_id == second.actor_id
        and first.incarnation == second.incarnation
        and first.policy_version == second.policy_version
        and second.seq == first.seq + 1
        and first.num_envs == second.num_envs
        and first.obs.shape[2:] == second.obs.shape[2:]
        and first.obs.dtype == second.obs.dtype
        and first.actions.shape[2:] == second.actions.shape[2:]
        and first.actions.dtype == second.actions.dtype
        and first.rewards.dtype == second.rewards.dtype
        and first.extras.keys() == second.extras.keys()
        and all(
            first.extras[n].shape[2:] == second.extras[n].shape[2:] and first.extras[n].dtype == second.extras[n].dtype
            for n in first.extras
        )
        and first.obs_stack == second.obs_stack
        and (first.core_state is None) == (second.core_state is None)
        and same_frames(first.obs[-1], second.obs[0])
        and (first.obs_stack == 1 or continues(first, second))
    )


def same_frames(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equal rows of observations (as they travel), compared a word at a time."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.nbytes <= 4096:  # small rows (CartPole's): two small copies beat any view or ufunc set-up
        return a.tobytes() == b.tobytes()
    if same_memory(a, b):  # consecutive unrolls of an actor's FrameRows share their overlap row
        return True
    frame_ndim = max(a.ndim - 1, 0)
    return bool((frame_words(a, frame_ndim) == frame_words(b, frame_ndim)).all())


def join_unrolls(batches: Sequence[TransitionBatch]) -> TransitionBatch:
    """Consecutive unrolls of one stream (each `joinable` with the one before) as one unroll of their summed T.

    It carries the first unroll's `seq` (a sender numbers what it sends; see PROTOCOL.md 2.1) and the last
    one's `env_steps`; `final_obs` rows stay in row-major (t, k) order because the unrolls follow in t. A
    stacked batch keeps the first unroll's `obs_history`, a recurrent one its `core_state`: the later ones'
    follow from the steps before them.
    """
    if len(batches) == 1:
        return batches[0]
    first, last = batches[0], batches[-1]
    obs = rows_in_place([b.obs for b in batches])
    if obs is None:
        obs = np.concatenate([b.obs[:-1] for b in batches] + [last.obs[-1:]])
    columns = {
        name: np.concatenate([getattr(b, name) for b in batches])
        for name in ("actions", "rewards", "terminated", "truncated", "final_obs")
    }
    extras = {name: np.concatenate([b.extras[name] for b in batches]) for name in first.extras}
    return TransitionBatch(
        policy_id=first.policy_id,
        actor_id=first.actor_id,
        incarnation=first.incarnation,
        seq=first.seq,
        policy_version=first.policy_version,
        env_steps=last.env_steps,
        obs=obs,
        **columns,
        extras=extras,
        obs_stack=first.obs_stack,
        obs_history=first.obs_history,
        core_state=first.core_state,
    )


def rows_in_place(arrays: Sequence[np.ndarray]) -> np.ndarray | None:
    """The joined observations as a view, where each array is a row range of one C-contiguous array starting on
    the row the one before ends on (an actor's FrameRows); None otherwise (then they are copied)."""
    base = arrays[0].base
    if not isinstance(base, np.ndarray) or not base.flags.c_contiguous or base.ndim != arrays[0].ndim:
        return None
    row = base.strides[0]
    where = [a.__array_interface__["data"][0] for a in arrays]
    start = where[0] - base.__array_interface__["data"][0]
    if row <= 0 or start % row:
        return None
    for i, a in enumerate(arrays):
        if a.base is not base or a.dtype != base.dtype or a.strides != base.strides or a.shape[1:] != base.shape[1:]:
            return None
        if i and where[i] != where[i - 1] + (len(arrays[i - 1]) - 1) * row:
            return None
    first = start // row
    return base[first : first + sum(len(a) - 1 for a in arrays) + 1]
