"""A numpy sum-tree: set many priorities and draw many proportional samples in O(batch log N)."""

from __future__ import annotations

import numpy as np

FANOUT = 16  # children per node: 16 float64 are two cache lines, and 1M leaves need only 5 levels


class SumTree:
    """A FANOUT-ary tree over `capacity` non-negative leaves; each inner node holds the sum (and max) below it.

    Level d is one flat array of FANOUT**d nodes (children of node i at level d: FANOUT*i .. FANOUT*i+FANOUT-1
    at level d+1), so every operation is a few numpy calls per level, and a wide tree has few levels: sampling
    at 1M leaves walks 5 of them, not 20, which keeps both the numpy calls and the cache misses down.

        tree.update(slots, priorities)      # O(batch log N)
        slots = tree.sample(batch, rng)     # O(batch log N), P(slot) = priority / total
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._depth = 1
        while FANOUT**self._depth < capacity:
            self._depth += 1
        # Level 0 is the root; np.zeros maps pages lazily, so the padding beyond `capacity` costs nothing.
        self._sums = [np.zeros(FANOUT**d, np.float64) for d in range(self._depth + 1)]
        # A max-tree beside the sum-tree keeps max_priority exact as priorities fall, not a stale record.
        self._maxes = [np.zeros(FANOUT**d, np.float64) for d in range(self._depth + 1)]

    @property
    def total(self) -> float:
        return float(self._sums[0][0])

    @property
    def max_priority(self) -> float:
        return float(self._maxes[0][0])

    def get(self, indices: np.ndarray) -> np.ndarray:
        """The priorities of leaves `indices`."""
        return self._sums[-1].take(self._check(indices))

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaf `indices[j]` to `priorities[j]` (the last one wins for a repeated index)."""
        idx = self._check(indices)
        pri = np.broadcast_to(np.asarray(priorities, np.float64), idx.shape)
        if idx.size == 0:
            return
        if not np.all(np.isfinite(pri)) or np.any(pri < 0):
            raise ValueError("priorities must be finite and >= 0")
        # Keep the last value of a repeated index, and sort so each level's parents dedupe in O(batch).
        nodes, rev_pos = np.unique(idx[::-1], return_index=True)
        pri = pri[::-1][rev_pos]
        self._sums[-1][nodes] = pri
        self._maxes[-1][nodes] = pri
        for level in range(self._depth - 1, -1, -1):
            nodes = nodes // FANOUT
            if nodes.size > 1:
                nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            # Recomputed from the children, never adjusted by a delta, so rounding errors cannot pile up.
            self._sums[level][nodes] = self._sums[level + 1].reshape(-1, FANOUT)[nodes].sum(axis=1)
            self._maxes[level][nodes] = self._maxes[level + 1].reshape(-1, FANOUT)[nodes].max(axis=1)

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """`batch_size` leaf indices (int64), one uniform draw in each of `batch_size` equal slices of the total."""
        total = self.total
        if not total > 0.0:
            raise ValueError("cannot sample from a sum-tree whose priorities are all zero")
        targets = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        nodes = np.zeros(batch_size, np.int64)
        # ends[c, b]: what lies before child c of draw b's node (row 0 stays 0). Children along axis 0 keep the
        # comparisons and counts below one vector operation per child, not a short loop per draw.
        ends = np.zeros((FANOUT + 1, batch_size))
        flat, column = ends.reshape(-1), np.arange(batch_size)
        for level in range(1, self._depth + 1):
            children = self._sums[level].reshape(-1, FANOUT).take(nodes, axis=0)  # one contiguous row per draw
            np.cumsum(children.T, axis=0, out=ends[1:])  # sequential sums: a zero child adds exactly nothing
            # Strictly below the children's sum (float rounding can put a target at or past it), so the child c
            # found below has ends[c+1] > target >= ends[c]: a non-empty one, never a zero-priority leaf.
            np.minimum(targets, np.nextafter(ends[-1], 0.0), out=targets)
            choice = np.add.reduce(ends[1:] <= targets, axis=0, dtype=np.int64)
            targets -= flat.take(choice * batch_size + column)  # minus what lies before the child: never below 0
            nodes = nodes * FANOUT + choice
        return nodes

    def _check(self, indices: np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
            raise IndexError(f"sum-tree index out of range [0, {self.capacity})")
        return idx
