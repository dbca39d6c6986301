"""The on-policy loss terms, the running normalizers and the flat minibatches, each against a hand-computed case."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tandem.daemons.algorithms.appo.losses import (
    clipped_surrogate,
    explained_variance,
    normalized_advantages,
    value_loss,
)
from tandem.daemons.algorithms.appo.minibatches import FlatSteps, minibatch_rows
from tandem.daemons.algorithms.running_norm import RunningMeanStd


def test_clipped_surrogate_takes_the_pessimistic_term_per_step():
    # ratios 1.5 (A=+1: clipped to 1.2), 0.5 (A=+1: unclipped 0.5 is smaller), 1.5 (A=-1: -1.5 is smaller),
    # 1.0 (A=2: inside the range)
    ratios = torch.tensor([1.5, 0.5, 1.5, 1.0])
    advantages = torch.tensor([1.0, 1.0, -1.0, 2.0])
    behaviour = torch.zeros(4)
    loss, clip_fraction = clipped_surrogate(torch.log(ratios), behaviour, advantages, clip_ratio=0.2)
    assert loss.item() == pytest.approx(-(1.2 + 0.5 - 1.5 + 2.0) / 4)
    assert clip_fraction.item() == pytest.approx(3 / 4)


def test_value_loss_plain_and_clipped():
    values, targets = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 0.0])
    assert value_loss(values, targets).item() == pytest.approx(0.5 * (1 + 9) / 2)
    # old values 0 and 2.5, clip 0.5: clipped values 0.5 and 3.0; squared errors max((1, 2.25), (9, 9))
    old = torch.tensor([0.0, 2.5])
    assert value_loss(values, targets, old, clip=0.5).item() == pytest.approx(0.5 * (2.25 + 9) / 2)
    assert value_loss(values, targets, old, clip=0.0).item() == pytest.approx(0.5 * (1 + 9) / 2)  # 0 is off


def test_advantages_are_scaled_to_mean_0_std_1_and_a_single_one_is_left_alone():
    out = normalized_advantages(torch.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(out.numpy(), [-1.0, 0.0, 1.0], atol=1e-6)  # std (unbiased) of 1, 2, 3 is 1
    assert normalized_advantages(torch.tensor([5.0])).item() == 5.0


def test_explained_variance():
    targets = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(targets, targets) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), targets) == pytest.approx(0.0)
    assert math.isnan(explained_variance(targets, torch.ones(4)))


def test_running_mean_std_equals_the_statistics_of_everything_seen():
    rng = np.random.default_rng(0)
    parts = [rng.normal(3.0, 2.0, (n, 2)).astype(np.float32) for n in (5, 17, 1, 40)]
    norm = RunningMeanStd((2,))
    for part in parts:
        norm.update(torch.as_tensor(part))
    seen = np.concatenate(parts)
    # the prior (mean 0, variance 1) weighs 1e-4 of a row: invisible at this tolerance
    np.testing.assert_allclose(norm.mean.numpy(), seen.mean(0), rtol=1e-4)
    np.testing.assert_allclose(norm.var.numpy(), seen.var(0), rtol=1e-4)
    x = torch.as_tensor(seen)
    np.testing.assert_allclose(norm.denormalize(norm.normalize(x)).numpy(), seen, rtol=1e-5, atol=1e-5)
    assert set(norm.state_dict()) == {"mean", "var", "count"}  # buffers: checkpointed, never optimized
    assert not list(norm.parameters())


def test_running_mean_std_clips_normalized_values():
    norm = RunningMeanStd((1,), clip=2.0)
    norm.update(torch.tensor([0.0, 0.0, 2.0, 2.0]))  # mean 1, std 1
    np.testing.assert_allclose(norm.normalize(torch.tensor([1.0, 10.0, -10.0])).numpy(), [0.0, 2.0, -2.0], atol=1e-4)


def flat(steps: int, columns: int) -> FlatSteps:
    m = steps * columns
    return FlatSteps(
        obs=torch.arange(m, dtype=torch.float32)[:, None],
        actions=torch.zeros(m, 1),
        behaviour_logp=torch.zeros(m),
        start_logp=torch.zeros(m),
        advantages=torch.zeros(m),
        targets=torch.zeros(m),
        old_values=torch.zeros(m),
        streams=torch.arange(columns).repeat(steps),
    )


@pytest.mark.parametrize("by", ["steps", "unrolls"])
def test_minibatches_cover_every_step_once(by):
    data = flat(steps=6, columns=8)
    rows = minibatch_rows(data, 4, by, torch.Generator().manual_seed(0))
    assert len(rows) == 4
    everything = torch.cat(rows).sort().values
    assert torch.equal(everything, torch.arange(48))
    if by == "unrolls":  # a column's six steps are always in one minibatch, in time order
        for r in rows:
            streams = data.streams[r]
            assert all((streams == s).sum() == 6 for s in streams.unique())
            assert torch.equal(r, r.sort().values)
    else:  # shuffled steps: some minibatch mixes steps of more than 2 columns
        assert max(len(data.streams[r].unique()) for r in rows) > 2
