"""Frame stacks sent once: a batch of stacked observations to its newest frames plus obs[0]'s history, and back.

gymnasium's FrameStackObservation (padding "reset") makes each observation the last S frames of its episode,
the episode's first frame repeated where the episode is younger than S steps. So within a batch the stack
of obs[t, k] is fixed by the newest frames, the episode boundaries (`terminated | truncated`) and the S-1
frames before obs[0, k]'s newest one; a truncated step's final observation is the stack of obs[t, k]
shifted by one frame. PROTOCOL.md 2.1.2 specifies the wire form.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from tandem.protocol.transitions import TransitionBatch


def stack_sources(done: np.ndarray, stack: int) -> np.ndarray:
    """[T+1, K, S] int64: where frame i of the stack of obs[t, k] lies in the extended column `ext[:, k]`.

    `ext` is [S-1 + T+1, K]: obs[0]'s S-1 earlier frames, then the newest frame of obs[0..T]. A frame older
    than its episode's first frame is that first frame (the padding of FrameStackObservation)."""
    steps, envs = done.shape
    first = np.zeros((steps + 1, envs), np.int64)  # step at which each obs's episode began in this batch (0: before)
    first[1:] = np.where(done, np.arange(1, steps + 1)[:, None], 0)
    np.maximum.accumulate(first, axis=0, out=first)
    lowest = np.where(first > 0, first + stack - 1, 0)  # in ext positions; 0 lets obs[0]'s history through
    newest = np.arange(steps + 1)[:, None, None] + np.arange(stack)[None, None, :]  # ext position of frame i of obs[t]
    return np.maximum(newest, lowest[:, :, None])


def final_sources(sources: np.ndarray, truncated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each set `truncated[t, k]` in row-major order: (ext positions of its final stack's S-1 older frames, k)."""
    t_idx, k_idx = np.nonzero(truncated)
    return sources[t_idx, k_idx, 1:], k_idx


def extended(history: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """[S-1 + T+1, K, *frame]: obs[0]'s older frames ([K, S-1, ...] history) followed by the newest frames."""
    return np.concatenate([np.swapaxes(history, 0, 1), frames])


def rebuild(
    frames: np.ndarray, history: np.ndarray, done: np.ndarray, final_frames: np.ndarray, truncated: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(obs [T+1, K, S, *frame], final_obs [F, S, *frame]) from the newest frames, obs[0]'s history and the flags."""
    stack = history.shape[1] + 1
    ext = extended(history, frames)
    src = stack_sources(done, stack)
    obs = ext[src, np.arange(frames.shape[1])[None, :, None]]
    old, k_idx = final_sources(src, truncated)
    final = np.concatenate([ext[old, k_idx[:, None]], final_frames[:, None]], axis=1)
    return obs, final


def pack(batch: TransitionBatch, stack: int) -> TransitionBatch | None:
    """`batch` with each [S, ...] observation cut to its newest frame (plus obs_history), or None when its stacks
    are not FrameStackObservation's (rebuilding them would not give them back exactly): send it whole then."""
    if batch.obs_stack != 1 or batch.keyed:
        return None
    cut = cut_stacks(batch.obs, batch.final_obs, batch.terminated | batch.truncated, batch.truncated, stack)
    if cut is None:
        return None
    frames, history, final_frames = cut
    return dataclasses.replace(batch, obs=frames, final_obs=final_frames, obs_stack=stack, obs_history=history)


def pack_keys(batch: TransitionBatch, candidates: Mapping[str, int]) -> tuple[TransitionBatch, list[str]]:
    """A Dict observation's batch with each candidate key (key -> S) whose stacks follow the rule cut to its
    newest frames (PROTOCOL.md 2.1.5), and the candidates that do not (they travel whole)."""
    if not batch.keyed or batch.obs_stacks:
        return batch, list(candidates)
    done = batch.terminated | batch.truncated
    obs, final = dict(batch.obs), dict(batch.final_obs)
    history: dict[str, np.ndarray] = {}
    packed: dict[str, int] = {}
    whole = []
    for key, stack in candidates.items():
        cut = cut_stacks(obs[key], final[key], done, batch.truncated, stack) if key in obs else None
        if cut is None:
            whole.append(key)
            continue
        obs[key], history[key], final[key] = cut
        packed[key] = stack
    if not packed:
        return batch, whole
    return dataclasses.replace(batch, obs=obs, final_obs=final, obs_history=history, obs_stacks=packed), whole


def cut_stacks(
    obs: np.ndarray, final_obs: np.ndarray, done: np.ndarray, truncated: np.ndarray, stack: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(newest frames, obs[0]'s history, final newest frames) of [T+1, K, S, ...] stacks, or None when they do not
    follow FrameStackObservation's rule (rebuilding would not give them back exactly)."""
    if stack < 2 or obs.ndim < 3 or obs.shape[2] != stack:
        return None
    # Checked, not assumed: an env whose stacks follow another rule must not be silently changed.
    if not follows_rule(obs, done, final_obs, truncated):
        return None
    return (
        np.ascontiguousarray(obs[:, :, -1]),
        np.ascontiguousarray(obs[0, :, :-1]),
        np.ascontiguousarray(final_obs[:, -1]),
    )


def frame_words(arr: np.ndarray, frame_ndim: int) -> np.ndarray:
    """`arr` with its last `frame_ndim` axes (one frame) flattened to words, 8-byte where the frame allows: frames
    compared this way are compared bitwise, as their bytes travel (a NaN equals itself, -0.0 is not 0.0)."""
    lead = arr.shape[: arr.ndim - frame_ndim]
    count = math.prod(arr.shape[arr.ndim - frame_ndim :])  # math.prod: np.prod costs ~7 us a call
    flat = arr.reshape(*lead, count)  # a view where each frame is contiguous (a strided stack of frames too)
    if count > 1 and flat.strides[-1] != arr.itemsize:
        flat = np.ascontiguousarray(flat)
    words = flat.view(np.uint8)
    return words.view(np.uint64) if words.shape[-1] % 8 == 0 else words


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """True when `a` and `b` are views of the very same elements (then equal without reading them)."""
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def follows_rule(obs: np.ndarray, done: np.ndarray, final_obs: np.ndarray, truncated: np.ndarray) -> bool:
    """True when `rebuild` would give `obs` and `final_obs` back exactly, checked without rebuilding them.

    By induction over t, rebuilding is exact when every stack after obs[0] is the one before it shifted by a
    frame, every episode's first stack is its newest frame S times, and every final stack is its step's
    observation shifted (obs[0]'s stack is sent as it is). This runs on every actor unroll: comparing
    slices costs a fraction of rebuilding every stack and comparing."""
    frame_ndim = obs.ndim - 3
    words = frame_words(obs, frame_ndim)  # [T+1, K, S, W]
    same = (words[1:, :, :-1] == words[:-1, :, 1:]).all(axis=(2, 3))
    if not np.all(same | done):
        return False
    t_idx, k_idx = np.nonzero(done)
    if len(t_idx):
        starts = words[t_idx + 1, k_idx]  # [E, S, words]: each frame must be the newest one
        if not (starts == starts[:, -1:]).all():
            return False
    t_idx, k_idx = np.nonzero(truncated)
    if final_obs.shape != (len(t_idx), *obs.shape[2:]) or final_obs.dtype != obs.dtype:
        return False
    if len(t_idx):
        if not np.array_equal(frame_words(final_obs, frame_ndim)[:, :-1], words[t_idx, k_idx, 1:]):
            return False
    return True


def end_history(batch: TransitionBatch) -> np.ndarray:
    """[K, S-1, *frame]: frames 0..S-2 of obs[T]'s stacks, from a stacked batch (what the next unroll's
    obs_history must be)."""
    stack, envs, steps = batch.obs_stack, batch.num_envs, batch.num_steps
    done = batch.terminated | batch.truncated
    # ext position (as in stack_sources) of the first frame of obs[T]'s episode in each column: after its
    # last episode end, or 0 (obs[0]'s history still reaches in) where the batch has none.
    ended = done.any(axis=0)
    first = np.where(ended, steps - np.argmax(done[::-1], axis=0) + stack - 1, 0)
    pos = np.maximum(steps + np.arange(stack - 1), first[:, None])  # [K, S-1]
    if steps >= stack - 1:  # every frame is a newest frame of this batch: one gather (a joinability check each)
        return batch.obs[pos - (stack - 1), np.arange(envs)[:, None]]
    out = np.empty((envs, stack - 1, *batch.obs.shape[2:]), batch.obs.dtype)
    for k in range(envs):
        for i in range(stack - 1):  # still one of obs[0]'s older frames, or a newest frame of this batch
            p = int(pos[k, i])
            out[k, i] = batch.obs_history[k, p] if p < stack - 1 else batch.obs[p - (stack - 1), k]
    return out


def starts_in_last_stack(terminated: np.ndarray, truncated: np.ndarray, stack: int) -> np.ndarray:
    """[K] bool: where an episode starts among the newest S-1 frames of obs[T]'s stack (then its older frames
    are not simply obs[T-S+1..T-1]'s newest ones). Needs T >= S-1."""
    tail = slice(len(terminated) - stack + 1, len(terminated))
    return terminated[tail].any(axis=0) | truncated[tail].any(axis=0)


def continues(first: TransitionBatch, second: TransitionBatch) -> bool:
    """True when `second.obs_history` holds the older frames of `first.obs[T]`'s stacks, as `end_history(first)`
    would give them, compared in place: most columns' are obs[T-S+1..T-1]'s newest frames (an actor's FrameRows
    hands out exactly those rows, then nothing is read); a column where an episode started among them has the
    start's frame repeated."""
    stack, steps, hist = first.obs_stack, first.num_steps, second.obs_history
    if hist is None or hist.shape != (first.num_envs, stack - 1, *first.obs.shape[2:]) or hist.dtype != first.obs.dtype:
        return False
    if steps < stack - 1:
        return np.array_equal(end_history(first), hist)
    started = starts_in_last_stack(first.terminated, first.truncated, stack)
    older = first.obs[steps - stack + 1 : steps].swapaxes(0, 1)  # [K, S-1, *frame], newest last
    if not started.any() and same_memory(older, hist):
        return True
    frame_ndim = first.obs.ndim - 2
    same = (frame_words(older, frame_ndim) == frame_words(hist, frame_ndim)).all(axis=(1, 2))
    if not same[~started].all():
        return False
    done = first.terminated | first.truncated
    for k in np.flatnonzero(started):  # obs[T]'s episode started at step `begin`: its frame fills the front
        begin = steps - int(np.argmax(done[::-1, k]))
        expected = [first.obs[max(steps - stack + 1 + i, begin), k] for i in range(stack - 1)]
        if not all(frame.tobytes() == hist[k, i].tobytes() for i, frame in enumerate(expected)):  # bitwise
            return False
    return True


def unpack(batch: TransitionBatch) -> TransitionBatch:
    """The batch with whole stacks again; an unstacked batch is returned as it is."""
    done = batch.terminated | batch.truncated
    if batch.obs_stacks:  # a Dict observation's stacked keys (PROTOCOL.md 2.1.5), each rebuilt on its own
        obs, final = dict(batch.obs), dict(batch.final_obs)
        for key in batch.obs_stacks:
            obs[key], final[key] = rebuild(obs[key], batch.obs_history[key], done, final[key], batch.truncated)
        return dataclasses.replace(batch, obs=obs, final_obs=final, obs_history=None, obs_stacks={})
    if batch.obs_stack == 1:
        return batch
    obs, final = rebuild(batch.obs, batch.obs_history, done, batch.final_obs, batch.truncated)
    return dataclasses.replace(batch, obs=obs, final_obs=final, obs_stack=1, obs_history=None)


def unpack_side_by_side(batches: list[TransitionBatch]) -> list[TransitionBatch]:
    """`unpack` of each batch; unrolls of one length, framed alike, are rebuilt into one array [T+1, N, S, ...]
    whose column blocks become their obs, so that joining them again along K (keyed.concat) copies nothing."""
    first = batches[0] if batches else None
    alike = first is not None and all(
        b.obs_stack == first.obs_stack > 1
        and not b.keyed
        and b.num_steps == first.num_steps
        and b.obs.shape[2:] == first.obs.shape[2:]
        and b.obs.dtype == first.obs.dtype
        for b in batches
    )
    if not alike or len(batches) < 2:
        return [unpack(b) for b in batches]
    stack, widths = first.obs_stack, [b.num_envs for b in batches]
    frame, envs = first.obs.shape[2:], sum(widths)
    ext = np.empty((stack - 1 + first.num_steps + 1, envs, *frame), first.obs.dtype)  # every column's, side by side
    sources = np.empty((first.num_steps + 1, envs, stack), np.int64)
    unpacked, start = [], 0
    for b, width in zip(batches, widths):
        cols = slice(start, start + width)
        ext[: stack - 1, cols] = np.swapaxes(b.obs_history, 0, 1)
        ext[stack - 1 :, cols] = b.obs
        src = stack_sources(b.terminated | b.truncated, stack)
        sources[:, cols] = src * envs + np.arange(start, start + width)[None, :, None]  # rows of ext laid flat
        old, k_idx = final_sources(src, b.truncated)
        final = np.concatenate([ext[old, (k_idx + start)[:, None]], b.final_obs[:, None]], axis=1)
        unpacked.append((b, cols, final))
        start += width
    obs = np.empty((first.num_steps + 1, envs, stack, *frame), first.obs.dtype)
    # mode="clip": the sources are in range by construction, and "raise" would buffer the whole output first
    np.take(ext.reshape(-1, *frame), sources.reshape(-1), axis=0, out=obs.reshape(-1, *frame), mode="clip")
    return [
        dataclasses.replace(b, obs=obs[:, cols], final_obs=final, obs_stack=1, obs_history=None)
        for b, cols, final in unpacked
    ]
