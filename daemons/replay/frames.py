"""Replay of frame-stacked observations that stores each frame once: a frame ring plus transitions of references."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from tandem.daemons.replay.batch import SampledBatch
from tandem.daemons.replay.buffer import ReplayBuffer, mapped_zeros
from tandem.daemons.replay.nstep import NStepAccumulator
from tandem.protocol import TransitionBatch, stacks

FRAME_SLACK = 16  # the frame ring holds capacity * (1 + 1/16) frames: room for final frames and stream starts


class FrameReplay:
    """ReplayBuffer's interface for observations that are stacks of S frames (axis 0), storing each frame once.

    Frames go into a ring as batches arrive, each numbered by how many frames were written before it; a
    transition holds the ring slots of its observation's S frames and of its bootstrap observation's. Stacks
    are rebuilt when sampling, so SampledBatch.obs / next_obs keep their [B, S, *frame] shape.

    A frame slot is never reused while a live transition refers to it: the frames a batch's transitions
    refer to are its own, its stream's previous batch's (obs[0] and the n-step windows carried across) or
    older carried ones, and before a write overwrites frame numbers below `cutoff`, every transition added in
    a batch whose oldest reference is below `cutoff` is evicted, with all older ones (eviction stays
    first-in first-out). Transitions whose carried frames were already overwritten are dropped and counted.

        replay.add(transition_batch)        # n-step windows (self.nstep) of frames written once
        batch = replay.sample(256, beta)
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        action_shape: tuple[int, ...],
        action_dtype: Any,
        n: int,
        gamma: float,
        prioritized: bool = False,
        alpha: float = 0.6,
        seed: int = 0,
        frame_capacity: int | None = None,
    ) -> None:
        if len(obs_shape) < 1 or obs_shape[0] < 2:
            raise ValueError(f"frame replay needs observations [S >= 2, *frame], got {obs_shape}")
        self.stack, self.frame_shape = int(obs_shape[0]), tuple(obs_shape[1:])
        self.obs_shape = tuple(obs_shape)
        self.frame_capacity = frame_capacity or capacity + capacity // FRAME_SLACK + 1024
        if self.frame_capacity >= 2**31:
            raise ValueError(f"frame capacity {self.frame_capacity} does not fit int32 references")
        self.frames = mapped_zeros((self.frame_capacity, *self.frame_shape), obs_dtype)  # mapped lazily, as it fills
        self.written = 0  # frames ever written: frame number f lies in slot f % frame_capacity while f >= oldest
        self.rows = ReplayBuffer(
            capacity,
            (self.stack,),
            np.int32,
            action_shape,
            action_dtype,
            prioritized=prioritized,
            alpha=alpha,
            seed=seed,
        )
        self.prioritized = prioritized
        self.nstep = NStepAccumulator(n, gamma)
        # (actor, incarnation) -> (next seq, frame numbers of obs[T]'s stack [K, S]): the next batch's obs[0]
        self._streams: OrderedDict[tuple[str, int], tuple[int, np.ndarray]] = OrderedDict()
        # (last transition number of a batch, its oldest frame number), oldest references increasing front to back
        self._blocks: deque[tuple[int, int]] = deque()
        self.dropped_overwritten = 0  # transitions whose carried frames were overwritten before they completed
        self.batches_unstackable = 0
        self.batches_too_large = 0  # batches of more than half the frame ring

    @property
    def capacity(self) -> int:
        return self.rows.capacity

    @property
    def total_added(self) -> int:
        return self.rows.total_added

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def oldest(self) -> int:
        """The oldest frame number still in the ring."""
        return max(0, self.written - self.frame_capacity)

    def bytes_per_transition(self) -> float:
        """Memory of the rings divided by the transitions they hold when full."""
        return (self.frames.nbytes + self.rows.capacity * self.rows.row_bytes) / self.rows.capacity

    def add(self, batch: TransitionBatch) -> int:
        """Write `batch`'s new frames, run the n-step windows it completes and store them; returns how many."""
        if batch.obs_stack == 1:
            packed = stacks.pack(batch, self.stack)
            if packed is None:
                self.batches_unstackable += 1
                return 0
            batch = packed
        steps, envs = batch.num_steps, batch.num_envs
        key = (batch.actor_id, batch.incarnation)
        prev = self._streams.pop(key, None)
        fresh = steps * envs + len(batch.final_obs)
        if prev is not None and (
            prev[0] != batch.seq
            or prev[1].shape[0] != envs
            or (prev[1].size and prev[1].min() < self.written + fresh - self.frame_capacity)
        ):
            prev = None  # not the next batch of its stream, or its obs[0] frames are about to go
        count = fresh + (0 if prev is not None else envs * self.stack)
        if count > self.frame_capacity // 2:  # would evict most of replay at once: a misconfigured capacity
            self.batches_too_large += 1
            return 0
        self._make_room(count)
        # ext[p, k]: frame numbers of obs[0]'s S-1 older frames, then of the newest frames of obs[0..T].
        ext = np.empty((self.stack + steps, envs), np.int64)
        base = self.written
        if prev is not None:
            ext[: self.stack] = prev[1].T
        else:
            self._write(
                np.concatenate([np.swapaxes(batch.obs_history, 0, 1), batch.obs[:1]]).reshape(-1, *self.frame_shape)
            )
            ext[: self.stack] = base + np.arange(self.stack * envs).reshape(self.stack, envs)
        first_new = self.written
        self._write(batch.obs[1:].reshape(-1, *self.frame_shape))
        ext[self.stack :] = first_new + np.arange(steps * envs).reshape(steps, envs)
        final_numbers = self.written + np.arange(len(batch.final_obs))
        self._write(batch.final_obs)
        src = stacks.stack_sources(batch.terminated | batch.truncated, self.stack)
        refs = ext[src, np.arange(envs)[None, :, None]]  # [T+1, K, S] frame numbers
        old, k_idx = stacks.final_sources(src, batch.truncated)
        final_refs = np.concatenate([ext[old, k_idx[:, None]], final_numbers[:, None]], axis=1)
        self._streams[key] = (batch.seq + 1, refs[steps].copy())
        while len(self._streams) > self.nstep.max_streams:
            self._streams.popitem(last=False)
        numbered = dataclasses.replace(batch, obs=refs, final_obs=final_refs, obs_stack=1, obs_history=None)
        return self._store(self.nstep.add(numbered))

    def _store(self, tr: Any) -> int:
        if not len(tr):
            return 0
        lowest = np.minimum(tr.obs.min(axis=1), tr.next_obs.min(axis=1))
        alive = lowest >= self.oldest
        if not alive.all():  # windows carried across batches while other streams filled the ring
            self.dropped_overwritten += int(np.count_nonzero(~alive))
            tr = type(tr)(**{f.name: getattr(tr, f.name)[alive] for f in dataclasses.fields(tr)})
            lowest = lowest[alive]
            if not len(tr):
                return 0
        slots = dataclasses.replace(
            tr,
            obs=(tr.obs % self.frame_capacity).astype(np.int32),
            next_obs=(tr.next_obs % self.frame_capacity).astype(np.int32),
        )
        stored = self.rows.add(slots)
        block_min = int(lowest.min())
        while self._blocks and self._blocks[-1][1] >= block_min:
            self._blocks.pop()  # a newer block refers to older frames: its eviction covers the popped one's
        self._blocks.append((self.rows.total_added - 1, block_min))
        return stored

    def _make_room(self, count: int) -> None:
        """Evict the transitions that refer to frames the next `count` frames overwrite."""
        cutoff = self.written + count - self.frame_capacity
        last = -1
        while self._blocks and self._blocks[0][1] < cutoff:
            last = self._blocks.popleft()[0]
        if last >= 0:
            first_live = self.rows.total_added - len(self.rows)
            self.rows.evict_oldest(last + 1 - first_live)

    def _write(self, frames: np.ndarray) -> None:
        count = len(frames)
        first = self.written % self.frame_capacity
        head = min(count, self.frame_capacity - first)
        self.frames[first : first + head] = frames[:head]
        self.frames[: count - head] = frames[head:]
        self.written += count

    def sample(self, batch_size: int, beta: float = 0.4) -> SampledBatch:
        """As ReplayBuffer.sample, with the stacks rebuilt from the frame ring."""
        return self._stacked(self.rows.sample(batch_size, beta))

    def live_slots(self) -> np.ndarray:
        return self.rows.live_slots()

    def gather(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        cols = self.rows.gather(slots)
        cols["obs"], cols["next_obs"] = (
            self.frames.take(cols["obs"], axis=0),
            self.frames.take(cols["next_obs"], axis=0),
        )
        return cols

    def _stacked(self, batch: SampledBatch) -> SampledBatch:
        return dataclasses.replace(
            batch, obs=self.frames.take(batch.obs, axis=0), next_obs=self.frames.take(batch.next_obs, axis=0)
        )

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.rows.update_priorities(indices, priorities)

    def state_dict(self) -> dict[str, Any]:
        """The rows' state (frame slots in obs / next_obs) plus the frame ring and its eviction marks."""
        state = self.rows.state_dict()
        blocks = np.array(self._blocks, np.int64).reshape(-1, 2)
        state.update(
            frames=self.frames[: min(self.written, self.frame_capacity)],
            frames_written=self.written,
            frame_capacity=self.frame_capacity,
            frame_blocks=blocks,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict() returned into a replay built with the same capacities and shapes.
        Streams start afresh: the next batch of each writes its obs[0] stack again."""
        if int(state["frame_capacity"]) != self.frame_capacity:
            raise ValueError(f"saved frame capacity {int(state['frame_capacity'])} differs from {self.frame_capacity}")
        frames, written = np.asarray(state["frames"]), int(state["frames_written"])
        if frames.shape != (min(written, self.frame_capacity), *self.frame_shape) or frames.dtype != self.frames.dtype:
            raise ValueError(
                f"frames: saved {frames.dtype} {frames.shape}, expected {self.frames.dtype} "
                f"{(min(written, self.frame_capacity), *self.frame_shape)}"
            )
        self.rows.load_state_dict(state)
        self.frames[: len(frames)] = frames
        self.written = written
        self._blocks = deque((int(a), int(b)) for a, b in np.asarray(state["frame_blocks"], np.int64).reshape(-1, 2))
        self._streams.clear()
