"""A preallocated ring of n-step transitions with uniform or prioritized sampling that never scans it."""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from typing import Any

import numpy as np

from tandem.daemons.replay.batch import SampledBatch
from tandem.daemons.replay.nstep import NStepTransitions
from tandem.daemons.replay.sumtree import SumTree

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

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        action_shape: tuple[int, ...],
        action_dtype: Any,
        prioritized: bool = False,
        alpha: float = 0.6,
        seed: int = 0,
        eps: float = 1e-6,
    ) -> None:
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
        # One row per transition, its columns side by side, so a sampled row costs one cache miss, not one
        # per column (rows padded to a cache-line-friendly size and aligned to 64 bytes).
        self._rows = aligned_rows(capacity, row_dtype(self.obs_shape, obs_dtype, self.action_shape, action_dtype))
        self._pos = 0  # next slot to write
        self._size = 0  # live slots: the `_size` slots before `_pos` (the oldest may be evicted, see evict_oldest)
        self._added = 0  # transitions ever stored, for metrics
        self._rng = np.random.default_rng(seed)
        self._tree = SumTree(capacity) if prioritized else None

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def row_bytes(self) -> int:
        """Bytes one transition's row takes (its columns side by side, padded)."""
        return self._rows.dtype.itemsize

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
        rows = self._rows
        for name in COLUMNS:  # all checked before any is written, so a bad add changes nothing
            src, want = getattr(transitions, name), (count, *rows.dtype[name].shape)
            if src.shape != want:
                raise ValueError(f"{name}: expected shape {want}, got {src.shape}")
        for name in COLUMNS:
            src, col = getattr(transitions, name)[skip:], rows[name]
            col[first : first + head] = src[:head]
            col[: stored - head] = src[head:]
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
            if self._size < self._capacity:
                indices = (indices + self._oldest()) % self._capacity  # the live slots may wrap after evictions
            weights = np.ones(batch_size, np.float32)
        else:
            indices = self._tree.sample(batch_size, self._rng)
            probs = self._tree.get(indices) / self._tree.total
            # Normalised by the batch's largest weight: an O(buffer) minimum over all slots is what we avoid.
            w = (self._size * probs) ** -beta
            weights = (w / w.max()).astype(np.float32)
        return SampledBatch(**self.gather(indices), indices=indices, weights=weights)

    def gather(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """The columns of `slots`, each a contiguous array: one row read per slot, then split."""
        rows = self._rows.take(slots)  # take copies whole records; [slots] goes field by field, several times slower
        return {name: np.ascontiguousarray(rows[name]) for name in COLUMNS}

    def live_slots(self) -> np.ndarray:
        """Every slot holding a live transition, oldest first."""
        return (self._oldest() + np.arange(self._size)) % self._capacity

    def _oldest(self) -> int:
        return (self._pos - self._size) % self._capacity

    def evict_oldest(self, count: int) -> int:
        """Forget the `count` oldest live transitions (a frame ring reuses what they refer to); returns how many."""
        count = min(max(count, 0), self._size)
        if count and self._tree is not None:
            self._tree.update((self._oldest() + np.arange(count)) % self._capacity, 0.0)  # never drawn again
        self._size -= count
        return count

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set slots' priorities to |priorities| + eps; non-finite entries keep the slot's old priority."""
        if self._tree is None:
            return
        idx = np.asarray(indices, np.int64).reshape(-1)
        pri = np.abs(np.asarray(priorities, np.float64).reshape(-1))
        if idx.shape != pri.shape:
            raise ValueError(f"{idx.size} indices but {pri.size} priorities")
        if idx.size and (idx.min() < 0 or idx.max() >= self._capacity):
            raise IndexError(f"replay slot out of range [0, {self._capacity})")
        # Slots evicted or never written since they were sampled keep priority 0: they must not come back.
        finite = np.isfinite(pri) & ((idx - self._oldest()) % self._capacity < self._size)
        # Clip so p**alpha stays finite and the sum cannot overflow however large a TD error gets.
        self._tree.update(idx[finite], np.minimum(pri[finite] + self.eps, 1e30) ** self.alpha)

    def state_dict(self) -> dict[str, Any]:
        """Contents and position as numpy arrays and ints (no pickle needed); arrays are views, not copies."""
        filled = min(self._added, self._capacity)  # slots ever written (evicted ones included: `size` says which live)
        state: dict[str, Any] = {name: self._rows[name][:filled] for name in COLUMNS}
        state.update(
            capacity=self._capacity,
            pos=self._pos,
            size=self._size,
            added=self._added,
            prioritized=int(self.prioritized),
            rng=_rng_to_array(self._rng),
        )
        if self._tree is not None:
            state["priorities"] = self._tree.get(np.arange(filled))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict() returned, into a buffer built with the same capacity, shapes and dtypes."""
        capacity, size, pos = int(state["capacity"]), int(state["size"]), int(state["pos"])
        if capacity != self._capacity:
            raise ValueError(f"saved capacity {capacity} differs from this buffer's {self._capacity}")
        filled = len(state["returns"])
        if (
            not 0 <= size <= filled <= capacity
            or not 0 <= pos < capacity
            or (filled < capacity and pos != filled % capacity)
        ):
            raise ValueError(f"saved size {size} / pos {pos} / {filled} rows do not fit capacity {capacity}")
        for name in COLUMNS:
            saved, want = np.asarray(state[name]), self._rows.dtype[name]
            if saved.shape != (filled, *want.shape) or saved.dtype != want.base:
                raise ValueError(
                    f"{name}: saved {saved.dtype} {saved.shape}, expected {want.base} {(filled, *want.shape)}"
                )
        for name in COLUMNS:
            self._rows[name][:filled] = state[name]
        self._size, self._pos, self._added = size, pos, int(state.get("added", filled))
        self._rng = _rng_from_array(np.asarray(state["rng"]))
        if self._tree is not None:
            self._tree = SumTree(self._capacity)
            saved = state.get("priorities")
            # A uniform buffer's state carries no priorities: start every slot equal.
            self._tree.update(np.arange(filled), np.ones(filled) if saved is None else np.asarray(saved, np.float64))
            dead = (self._oldest() + size + np.arange(filled - size)) % capacity  # evicted, not yet rewritten
            self._tree.update(dead, 0.0)


def row_dtype(obs_shape: tuple, obs_dtype: Any, action_shape: tuple, action_dtype: Any) -> np.dtype:
    """One transition's columns as one record, padded to a power of two up to 64 bytes, else to whole 64s."""
    shapes = {
        "obs": (obs_dtype, obs_shape),
        "actions": (action_dtype, action_shape),
        "returns": (np.float32, ()),
        "next_obs": (obs_dtype, obs_shape),
        "discounts": (np.float32, ()),
        "versions": (np.int64, ()),
    }
    packed = np.dtype([(name, np.dtype(dt), shape) for name, (dt, shape) in shapes.items()], align=True)
    size = packed.itemsize
    padded = 1 << (size - 1).bit_length() if size <= 64 else -(-size // 64) * 64
    return np.dtype(
        {
            "names": list(packed.names),
            "formats": [packed.fields[n][0] for n in packed.names],
            "offsets": [packed.fields[n][1] for n in packed.names],
            "itemsize": padded,
        }
    )


def aligned_rows(count: int, dtype: np.dtype) -> np.ndarray:
    """`count` zeroed records, page-aligned (so 64-byte rows never straddle a cache line)."""
    return mapped_zeros((count,), dtype)


def mapped_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed array in its own anonymous mapping: pages are mapped lazily (memory as it fills), and the kernel
    is asked for huge pages, since random reads over a large ring otherwise miss the TLB as well as the cache."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    region = mmap.mmap(-1, max(count * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            region.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # not supported here: ordinary pages, just slower
            pass
    return np.frombuffer(region, dtype, count).reshape(shape)


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
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": w[0] | w[1] << 64, "inc": w[2] | w[3] << 64},
        "has_uint32": w[4],
        "uinteger": w[5],
    }
    return rng
