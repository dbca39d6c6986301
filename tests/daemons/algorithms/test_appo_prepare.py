"""An APPO update on a batch prepared apart (unrolls rebuilt side by side, made tensors before the update) is
bit for bit the update on the same unrolls unpacked one by one and handed over whole, as before."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from tandem.client.bench.learner_work import Unrolls
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.algorithms.unroll_tensors import PreparedUnrolls
from tandem.daemons.config.loader import config_from_dict
from tandem.protocol import TransitionBatch, stacks

STACKS = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
TINY = {"kind": "tandem.client.bench.learner_work:tiny_net"}  # the data path is under test, not the network


def received(count: int) -> list[TransitionBatch]:
    """`count` unrolls of one actor (8 steps of 3 envs, an episode end and a truncation each) as received."""
    unrolls = Unrolls(8, 3, behaviour_logp=True)
    return [TransitionBatch.from_frames([bytes(f) for f in unrolls.next_message()]) for _ in range(count)]


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])  # the CUDA case only on a GPU: CI allows no skip


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("targets", ["per_update", "per_minibatch"])
def test_a_prepared_batch_trains_exactly_as_the_unprepared_one(targets, device):
    config = config_from_dict(
        {
            "algorithm": {"name": "appo", "batch_size": 96, "epochs": 2, "minibatches": 2, "targets": targets},
            "model": TINY,
            "run": {"seed": 5},
        }
    )
    before, after = (make_algorithm(config, STACKS, gym.spaces.Discrete(6), device) for _ in range(2))
    unrolls = received(4)
    start = {name: value.clone() for name, value in before.net.state_dict().items()}
    prepared = after.prepare(stacks.unpack_side_by_side(unrolls))
    assert isinstance(prepared, PreparedUnrolls) and len(prepared.parts) == 1
    plain = before.update([stacks.unpack(u) for u in unrolls])
    same = after.update(prepared)
    assert dict(plain.metrics) == dict(same.metrics)
    for (name, mine), theirs in zip(before.net.state_dict().items(), after.net.state_dict().values()):
        assert torch.equal(mine, theirs), name
    assert not torch.equal(start["policy.out.weight"], before.net.state_dict()["policy.out.weight"])  # it trained


def test_the_prepared_tensors_are_the_unrolls_side_by_side():
    config = config_from_dict({"algorithm": {"name": "appo", "batch_size": 96}, "run": {"seed": 5}})
    algorithm = make_algorithm(config, STACKS, gym.spaces.Discrete(6), "cpu")
    unrolls = received(3)
    (part,) = algorithm.prepare(stacks.unpack_side_by_side(unrolls)).parts
    whole = [stacks.unpack(u) for u in unrolls]
    assert torch.equal(part.obs, torch.as_tensor(np.concatenate([u.obs for u in whole], axis=1)))
    assert torch.equal(part.finals, torch.as_tensor(np.concatenate([u.final_obs for u in whole])))
    assert part.final_n.tolist() == [2, 5, 8]  # each unroll's truncated env, in the columns side by side


def test_minibatch_rows_gathered_into_reused_tensors_equal_fresh_ones():
    from dataclasses import fields

    from tandem.daemons.algorithms.appo.minibatches import FlatSteps, RowBuffers

    generator = torch.Generator().manual_seed(0)
    size = 10
    flat = FlatSteps(
        obs={"image": torch.randint(0, 255, (size, 2, 5, 5), dtype=torch.uint8), "x": torch.rand(size, 3)},
        actions=torch.randint(0, 6, (size, 1)),
        behaviour_logp=torch.rand(size),
        start_logp=torch.rand(size),
        advantages=torch.rand(size),
        targets=torch.rand(size),
        old_values=torch.rand(size),
        streams=torch.arange(size),
    )
    buffers = RowBuffers()
    previous = None
    for rows in torch.chunk(torch.randperm(size, generator=generator), 3):  # 4, 4 and 2 rows: a short last one
        fresh, reused = flat.take(rows), flat.take(rows, buffers)
        for f in fields(FlatSteps):
            mine, theirs = getattr(reused, f.name), getattr(fresh, f.name)
            for key in mine if isinstance(mine, dict) else [None]:
                a, b = (mine, theirs) if key is None else (mine[key], theirs[key])
                assert torch.equal(a, b), (f.name, key)
        if previous is not None:  # the same memory as the last minibatch's: it was overwritten, not copied anew
            assert reused.advantages.data_ptr() == previous
        previous = reused.advantages.data_ptr()
