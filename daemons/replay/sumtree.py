"""A numpy sum-tree: set many priorities and draw many proportional samples in O(batch log N)."""

from __future__ import annotations

import numpy as np


class SumTree:
    """Binary tree over `capacity` non-negative leaves; each inner node holds the sum (and max) below it.

    Stored as one flat array (root at 1, children of i at 2i and 2i+1, leaves from `size`), so every
    operation is a few numpy calls per tree level and none touches more than the paths it needs:

        tree.update(slots, priorities)      # O(batch log N)
        slots = tree.sample(batch, rng)     # O(batch log N), P(slot) = priority / total
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._leaf0 = 1 << max(0, (capacity - 1).bit_length())  # leaves padded to a power of two
        self._depth = self._leaf0.bit_length() - 1
        self._sum = np.zeros(2 * self._leaf0, np.float64)
        # A max-tree beside the sum-tree keeps max_priority exact as priorities fall, not a stale record.
        self._max = np.zeros(2 * self._leaf0, np.float64)

    @property
    def total(self) -> float:
        return float(self._sum[1])

    @property
    def max_priority(self) -> float:
        return float(self._max[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        """The priorities of leaves `indices`."""
        return self._sum[self._leaf0 + self._check(indices)]

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaf `indices[j]` to `priorities[j]` (the last one wins for a repeated index)."""
        idx = self._check(indices)
        pri = np.broadcast_to(np.asarray(priorities, np.float64), idx.shape)
        if idx.size == 0:
            return
        if not np.all(np.isfinite(pri)) or np.any(pri < 0):
            raise ValueError("priorities must be finite and >= 0")
        # Keep the last value of a repeated index, and sort so each level's parents dedupe in O(batch).
        rev_unique, rev_pos = np.unique(idx[::-1], return_index=True)
        pri = pri[::-1][rev_pos]
        nodes = rev_unique + self._leaf0
        self._sum[nodes] = pri
        self._max[nodes] = pri
        for _ in range(self._depth):
            nodes = nodes >> 1
            if nodes.size > 1:
                nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            left = nodes << 1
            # Recomputed from the children, never adjusted by a delta, so rounding errors cannot pile up.
            self._sum[nodes] = self._sum[left] + self._sum[left + 1]
            self._max[nodes] = np.maximum(self._max[left], self._max[left + 1])

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """`batch_size` leaf indices (int64), one uniform draw in each of `batch_size` equal slices of the total."""
        total = self.total
        if not total > 0.0:
            raise ValueError("cannot sample from a sum-tree whose priorities are all zero")
        targets = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        nodes = np.ones(batch_size, np.int64)
        for _ in range(self._depth):
            left = nodes << 1
            left_sum = self._sum[left]
            # Only step right into a non-empty subtree: float rounding can push a target past the left sum
            # of a node whose right side is empty, which would otherwise land on a zero-priority leaf.
            right = (targets >= left_sum) & (self._sum[left + 1] > 0.0)
            targets -= left_sum * right
            nodes = left + right
        return nodes - self._leaf0

    def _check(self, indices: np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
            raise IndexError(f"sum-tree index out of range [0, {self.capacity})")
        return idx
