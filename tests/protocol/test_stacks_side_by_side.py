"""Unrolls rebuilt side by side in one array (the on-policy learner's batch) are what unpacking each one gives,
and joining them again copies nothing; tensors' rows gathered by index are what indexing gives."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tandem.protocol import TransitionBatch, keyed, stacks
from tests.frame_envs import STACK, Actor


def framed_unrolls(widths: list[int], steps: int, end_prob: float, seed: int) -> list[TransitionBatch]:
    """Unrolls of `steps` steps of len(widths) actors, each with its own number of envs, cut to frames."""
    out = []
    for i, width in enumerate(widths):
        packed = stacks.pack(Actor(width, seed=seed + i, end_prob=end_prob).unroll(steps), STACK)
        assert packed is not None
        out.append(TransitionBatch.from_frames([bytes(f) for f in packed.to_frames()]))
    return out


@pytest.mark.parametrize("end_prob", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("steps", [1, 2, 5, 9])
def test_unrolls_rebuilt_side_by_side_equal_each_unpacked_alone(steps, end_prob):
    unrolls = framed_unrolls([3, 1, 4], steps, end_prob, seed=steps)
    alone = [stacks.unpack(u) for u in unrolls]
    together = stacks.unpack_side_by_side(unrolls)
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(b.obs, a.obs)
        np.testing.assert_array_equal(b.final_obs, a.final_obs)
        assert b.obs_stack == 1 and b.obs_history is None and b.final_obs.dtype == a.final_obs.dtype
    joined = keyed.concat([b.obs for b in together], axis=1)
    np.testing.assert_array_equal(joined, np.concatenate([a.obs for a in alone], axis=1))
    assert all(np.shares_memory(joined, b.obs) for b in together)  # the join is the array they lie in, no copy


def test_unlike_unrolls_are_unpacked_one_by_one_and_joined_by_copy():
    short, long = framed_unrolls([2], 3, 0.3, seed=1) + framed_unrolls([2], 5, 0.3, seed=2)
    together = stacks.unpack_side_by_side([short, long])  # lengths differ: no common array
    for a, b in zip([stacks.unpack(short), stacks.unpack(long)], together):
        np.testing.assert_array_equal(b.obs, a.obs)
    first, second = stacks.unpack_side_by_side(framed_unrolls([2, 2], 4, 0.3, seed=3))
    swapped = keyed.concat([second.obs, first.obs], axis=1)  # out of order: a copy, in the order asked
    np.testing.assert_array_equal(swapped, np.concatenate([second.obs, first.obs], axis=1))
    assert not np.shares_memory(swapped, first.obs)
    partial = keyed.concat([first.obs], axis=1)  # part of the array only: a copy of that part
    np.testing.assert_array_equal(partial, first.obs)
    unstacked = dataclasses.replace(stacks.unpack(short))
    assert stacks.unpack_side_by_side([unstacked])[0] is unstacked


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_rows_gathered_by_index_equal_indexing(dtype):
    images = torch.randint(0, 255, (10, 2, 3, 3), dtype=torch.uint8)
    rows = torch.tensor([7, 0, 7, 3], dtype=dtype)
    assert torch.equal(keyed.take(images, rows), images[rows])
    mask = torch.zeros(10, dtype=torch.bool)
    mask[[1, 4]] = True
    assert torch.equal(keyed.take(images, mask), images[mask])
    assert np.array_equal(keyed.take(images.numpy(), rows.numpy()), images.numpy()[rows.numpy()])
    both = keyed.take({"a": images, "b": images[:, 0]}, rows)
    assert torch.equal(both["a"], images[rows]) and torch.equal(both["b"], images[:, 0][rows])
