"""Gradient buckets: started while backward runs, strictly in order, zeros for a missing gradient, the mean written
back (the bucketing's pure logic, with a recording stand-in for the group's collectives; real Gloo replicas are in
test_replicas.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tandem.daemons.algorithms import gradient_step
from tandem.daemons.learner.gradient_buckets import GradientBuckets, Layout


class Done:
    def is_completed(self) -> bool:
        return True


class Recording:
    """Collectives of a group of `world_size` where every other member sent the same tensor as this one."""

    def __init__(self, world_size: int = 2):
        self.world_size, self.device = world_size, torch.device("cpu")
        self.started: list[torch.Tensor] = []
        self.on_start = lambda: None

    def start_sum(self, tensor: torch.Tensor, what: str) -> Done:
        self.on_start()
        self.started.append(tensor.clone())
        tensor.mul_(self.world_size)
        return Done()

    def wait(self, work: Done, what: str) -> None:
        pass


def network() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))


def test_the_last_layer_bucket_starts_before_backward_reaches_the_first_layer():
    net = network()
    params = list(net.parameters())
    group = Recording()
    buckets = GradientBuckets(group, {}, bucket_bytes=8 * 8 * 4, overlap=True)
    first_layer_ready_at_start: list[bool] = []
    group.on_start = lambda: first_layer_ready_at_start.append(params[0].grad is not None)
    buckets.begin(params)
    net(torch.randn(16, 4)).pow(2).mean().backward()
    buckets.finish()
    assert len(group.started) >= 3
    assert first_layer_ready_at_start[0] is False  # the first bucket went while autograd had layers to go


def test_buckets_start_in_layout_order_whatever_order_the_hooks_fire_in():
    params = [torch.zeros(10, requires_grad=True) for _ in range(4)]
    group = Recording()
    buckets = GradientBuckets(group, {}, bucket_bytes=40, overlap=True)  # one parameter per bucket
    buckets.begin(params)
    for index, p in enumerate(params):
        p.grad = torch.full_like(p, float(index))
    buckets.ready(params[0])  # the last bucket (layout is reversed): must wait for the ones before it
    assert group.started == []
    buckets.ready(params[3])
    buckets.ready(params[1])
    assert [t[0].item() for t in group.started] == [3.0]
    buckets.ready(params[2])
    assert [t[0].item() for t in group.started] == [3.0, 2.0, 1.0, 0.0]


def test_a_parameter_without_a_gradient_is_reduced_as_zeros_and_stepped_with_the_mean_as_on_the_others():
    params = [torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)]
    group = Recording(world_size=4)
    buckets = GradientBuckets(group, {}, bucket_bytes=1 << 20, overlap=True)
    buckets.begin(params)
    params[1].grad = torch.tensor([2.0, 6.0])
    buckets.finish()  # params[0] never got a gradient: its bucket starts at finish
    assert torch.equal(params[0].grad, torch.zeros(3))  # another replica may have had one: all step it alike
    assert torch.equal(params[1].grad, torch.tensor([2.0, 6.0]))  # (4 x each) / 4 members
    assert torch.equal(group.started[0], torch.tensor([2.0, 6.0, 0.0, 0.0, 0.0]))


def test_two_backward_passes_before_one_step_fall_back_to_one_reduce_of_the_final_gradients():
    net = network()
    params = list(net.parameters())
    group = Recording()
    counts: dict[str, float] = {}
    buckets = GradientBuckets(group, counts, bucket_bytes=64, overlap=True)
    buckets.begin(params)
    x = torch.randn(16, 4)
    net(x).sum().backward()
    net(x).sum().backward()  # gradients accumulate after their buckets started
    expected = [p.grad.clone() for p in params]
    buckets.finish()
    assert torch.equal(group.started[-1], torch.cat([g.reshape(-1) for g in expected]))
    assert all(torch.equal(p.grad, g) for p, g in zip(params, expected))


def test_gradient_step_hands_the_backward_to_the_installed_sync_and_clips_the_averaged_gradient():
    net = network()
    group = Recording()
    buckets = GradientBuckets(group, {}, bucket_bytes=1 << 20, overlap=True)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.0)
    gradient_step.SYNCS.append(buckets)
    try:
        norm = gradient_step.gradient_step(optimizer, net(torch.randn(8, 4)).sum(), net.parameters(), 0.5)
    finally:
        gradient_step.SYNCS.remove(buckets)
    assert len(group.started) == 1 and buckets.take_averaged()
    assert norm.item() > 0.5
    total = torch.sqrt(sum(p.grad.pow(2).sum() for p in net.parameters()))
    assert total.item() == pytest.approx(0.5, rel=1e-4)


def test_the_layout_cuts_buckets_at_the_size_and_keeps_each_parameter_whole():
    params = [torch.zeros(n) for n in (100, 5, 300, 1)]
    layout = Layout.of(params, bucket_bytes=420)
    assert layout.buckets == [[3], [2], [1, 0]]  # reversed; a parameter larger than a bucket gets its own
