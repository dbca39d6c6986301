"""A preallocated ring of n-step transitions with uniform or prioritized sampling that never scans it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from daemons.replay.batch import SampledBatch
from daemons.replay.nstep import NStepTransitions
from daemons.replay.sumtree import SumTree

COLUMNS = ("obs", "actions", "returns", "next_obs", "discounts", "versions")


class ReplayBuffer:
    """The newest `capacity` transitions; adding past capacity overwrites the oldest.

    The learner calls it like this:

        replay.add(nstep.add(transition_batch))
        batch = replay.sample(batch_size, beta)
        result = algorithm.update(batch)
        if result.priorities is not None:
            replay.update_priorities(batch.indices, result.priorities)   # a no-op for uniform replay

    Prioritized replay (Schaul et al. 2016) draws slot i with P(i) = p_i**alpha / sum_j p_j**alpha, where
    p_i = |TD error| + eps, new slots getting the largest priority present; importance weights are
    (N * P(i))**-beta divided by the batch's largest. Both modes cost O(batch) or O(batch log N) per sample.
    Not thread-safe: one learner thread owns it.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: Any, action_shape: tuple[int, ...],
                 action_dtype: Any, prioritized: bool = False, alpha: float = 0.6, seed: int = 0,
                 eps: float = 1e-6) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if eps <= 0:
            raise ValueError(f"eps must be > 0 so that no slot gets probability 0, got {eps}")
        self._capacity = capacity
        self.prioritized = prioritized
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.obs_shape = tuple(obs_shape)
        self.action_shape = tuple(action_shape)
        # np.zeros maps pages lazily, so a large capacity costs memory only as it fills.
        self._cols: dict[str, np.ndarray] = {
            "obs": np.zeros((capacity, *self.obs_shape), obs_dtype),
            "actions": np.zeros((capacity, *self.action_shape), action_dtype),
            "returns": np.zeros(capacity, np.float32),
            "next_obs": np.zeros((capacity, *self.obs_shape), obs_dtype),
            "discounts": np.zeros(capacity, np.float32),
            "versions": np.zeros(capacity, np.int64),
        }
        self._pos = 0  # next slot to write
        self._size = 0
        self._added = 0  # transitions ever stored, for metrics
        self._rng = np.random.default_rng(seed)
        self._tree = SumTree(capacity) if prioritized else None

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def total_added(self) -> int:
        return self._added

    def __len__(self) -> int:
        return self._size

    def add(self, transitions: NStepTransitions) -> int:
        """Store `transitions` in order after the newest; return how many were stored (at most capacity)."""
        count = len(transitions)
        if count == 0:
            return 0
        skip = max(0, count - self._capacity)  # of a batch larger than the ring only the newest fit
        stored = count - skip
        first = self._pos
        head = min(stored, self._capacity - first)  # written as two slices, not a fancy index, for speed
        for name, col in self._cols.items():  # all checked before any is written, so a bad add changes nothing
            src = getattr(transitions, name)
            if src.shape != (count, *col.shape[1:]):
                raise ValueError(f"{name}: expected shape {(count, *col.shape[1:])}, got {src.shape}")
        for name, col in self._cols.items():
            src = getattr(transitions, name)[skip:]
            col[first:first + head] = src[:head]
            col[:stored - head] = src[head:]
        if self._tree is not None:
            slots = (first + np.arange(stored)) % self._capacity
            self._tree.update(slots, self._tree.max_priority or 1.0)
        self._pos = (first + stored) % self._capacity
        self._size = min(self._size + stored, self._capacity)
        self._added += stored
        return stored

    def sample(self, batch_size: int, beta: float = 0.4) -> SampledBatch:
        """`batch_size` transitions drawn with replacement; `weights` are all ones for uniform replay."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer; add transitions first")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if self._tree is None:
            indices = self._rng.integers(0, self._size, batch_size, dtype=np.int64)
            weights = np.ones(batch_size, np.float32)
        else:
            indices = self._tree.sample(batch_size, self._rng)
            probs = self._tree.get(indices) / self._tree.total
            # Normalised by the batch's largest weight: an O(buffer) minimum over all slots is what we avoid.
            w = (self._size * probs) ** -beta
            weights = (w / w.max()).astype(np.float32)
        cols = {name: col[indices] for name, col in self._cols.items()}
        return SampledBatch(**cols, indices=indices, weights=weights)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set slots' priorities to |priorities| + eps; non-finite entries keep the slot's old priority."""
        if self._tree is None:
            return
        idx = np.asarray(indices, np.int64).reshape(-1)
        pri = np.abs(np.asarray(priorities, np.float64).reshape(-1))
        if idx.shape != pri.shape:
            raise ValueError(f"{idx.size} indices but {pri.size} priorities")
        if idx.size and (idx.min() < 0 or idx.max() >= self._size):
            raise IndexError(f"replay slot out of range [0, {self._size})")
        finite = np.isfinite(pri)
        # Clip so p**alpha stays finite and the sum cannot overflow however large a TD error gets.
        self._tree.update(idx[finite], np.minimum(pri[finite] + self.eps, 1e30) ** self.alpha)

    def state_dict(self) -> dict[str, Any]:
        """Contents and position as numpy arrays and ints (no pickle needed); arrays are views, not copies."""
        state: dict[str, Any] = {name: col[:self._size] for name, col in self._cols.items()}
        state.update(capacity=self._capacity, pos=self._pos, size=self._size, added=self._added,
                     prioritized=int(self.prioritized), rng=_rng_to_array(self._rng))
        if self._tree is not None:
            state["priorities"] = self._tree.get(np.arange(self._size))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict() returned, into a buffer built with the same capacity, shapes and dtypes."""
        capacity, size, pos = int(state["capacity"]), int(state["size"]), int(state["pos"])
        if capacity != self._capacity:
            raise ValueError(f"saved capacity {capacity} differs from this buffer's {self._capacity}")
        if not 0 <= size <= capacity or not 0 <= pos < capacity:
            raise ValueError(f"saved size {size} / pos {pos} do not fit capacity {capacity}")
        for name, col in self._cols.items():
            saved = np.asarray(state[name])
            if saved.shape != (size, *col.shape[1:]) or saved.dtype != col.dtype:
                raise ValueError(f"{name}: saved {saved.dtype} {saved.shape}, expected {col.dtype} {(size, *col.shape[1:])}")
        for name, col in self._cols.items():
            col[:size] = state[name]
        self._size, self._pos, self._added = size, pos, int(state.get("added", size))
        self._rng = _rng_from_array(np.asarray(state["rng"]))
        if self._tree is not None:
            self._tree = SumTree(self._capacity)
            saved = state.get("priorities")
            # A uniform buffer's state carries no priorities: start every slot equal.
            self._tree.update(np.arange(size), np.ones(size) if saved is None else np.asarray(saved, np.float64))


def _rng_to_array(rng: np.random.Generator) -> np.ndarray:
    """PCG64's state as six 64-bit words stored as int64 (which torch tensors also hold), so no pickled dict."""
    st = rng.bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise ValueError(f"only PCG64 generators are saved, not {st['bit_generator']}")
    words = [st["state"]["state"], st["state"]["inc"]]
    mask = (1 << 64) - 1
    flat = [w >> s & mask for w in words for s in (0, 64)] + [st["has_uint32"], st["uinteger"]]
    return np.array(flat, np.uint64).view(np.int64)


def _rng_from_array(words: np.ndarray) -> np.random.Generator:
    w = [int(x) for x in np.asarray(words, np.int64).view(np.uint64)]
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": w[0] | w[1] << 64, "inc": w[2] | w[3] << 64},
                               "has_uint32": w[4], "uinteger": w[5]}
    return rng
