"""Gradients averaged across a replica group in buckets, each reduced while the backward pass computes the rest.

The parameters an optimizer steps are cut into buckets of about `bucket_bytes`, in the reverse of their order
(the order backward makes their gradients ready in). A hook on each parameter counts it ready; a bucket whose
every gradient is ready is flattened and its all-reduce started at once, without waiting, while autograd goes on
with the earlier layers. Buckets start strictly in order, as DistributedDataParallel's reducer does: collectives
of one group are matched by their order, so every replica must start the same buckets in the same order whatever
order its hooks fire in. `finish` starts what is left (a parameter that got no gradient counts as zeros), waits
for each bucket with the group's timeout, and writes the mean back into the gradients.

With `overlap` off, `finish` reduces everything in one flat all-reduce after backward (the path before this one),
which `tandem bench replicas` measures against it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


class Collectives(Protocol):
    """The replica group's bounded collectives the buckets run through."""

    world_size: int
    device: torch.device

    def start_sum(self, tensor: torch.Tensor, what: str) -> Any: ...

    def wait(self, work: Any, what: str) -> None: ...


@dataclass
class Layout:
    """The buckets of one list of parameters: which parameter is in which bucket, where in its flat tensor."""

    params: list[torch.Tensor]
    buckets: list[list[int]]  # indices into params, each bucket in the order its gradients become ready
    where: dict[int, int]  # id(parameter) -> its bucket

    @classmethod
    def of(cls, params: list[torch.Tensor], bucket_bytes: int) -> Layout:
        buckets: list[list[int]] = [[]]
        size = 0
        for index in reversed(range(len(params))):
            nbytes = params[index].numel() * 4  # reduced as float32
            if buckets[-1] and size + nbytes > bucket_bytes:
                buckets.append([])
                size = 0
            buckets[-1].append(index)
            size += nbytes
        where = {id(params[i]): b for b, members in enumerate(buckets) for i in members}
        return cls(params, buckets, where)


@dataclass
class Round:
    """One backward pass's buckets: how many of each are ready, which started, their flat tensors and work."""

    layout: Layout
    ready: list[int]
    started: int = 0  # buckets 0..started-1 have their all-reduce running
    flats: list[torch.Tensor] = field(default_factory=list)
    works: list[Any] = field(default_factory=list)
    stale: bool = False  # a gradient changed after its bucket started (two backward passes before one step)
    error: BaseException | None = None  # a failure to start a bucket inside autograd, raised by finish


class GradientBuckets:
    """The GradientSync a replica group installs: bucketed, overlapped all-reduces of each backward's gradients."""

    def __init__(self, collectives: Collectives, counts: dict[str, float], bucket_bytes: int, overlap: bool):
        self.collectives, self.counts, self.bucket_bytes, self.overlap = collectives, counts, bucket_bytes, overlap
        self.layouts: dict[tuple[int, ...], Layout] = {}
        self.hooked: set[int] = set()
        self.handles: list[Any] = []
        self.round: Round | None = None
        self.averaged = False  # the gradients about to be stepped are already the group's mean
        for key in ("gradient_allreduce_s", "gradient_allreduce_bytes", "gradient_buckets", "gradient_buckets_early"):
            counts.setdefault(key, 0)  # over the learner's life, whatever generation it trains in

    # ------------------------------------------------------------------ GradientSync

    def begin(self, params: list[torch.Tensor]) -> None:
        if not params:
            self.round = None  # nothing to average (no parameter of this step needs a gradient)
            return
        key = tuple(id(p) for p in params)
        layout = self.layouts.get(key)
        if layout is None:
            layout = self.layouts[key] = Layout.of(params, self.bucket_bytes)
        if self.overlap:
            for p in params:
                if id(p) not in self.hooked:
                    self.hooked.add(id(p))
                    self.handles.append(p.register_post_accumulate_grad_hook(self.ready))
        self.round = Round(layout, [0] * len(layout.buckets))

    def finish(self) -> None:
        current, self.round = self.round, None
        if current is None:
            return
        start = time.monotonic()
        if current.error is not None:
            raise current.error
        if not self.overlap or current.stale:
            self.wait_all(current)  # keeps the group's collectives in step before the flat one
            self.flat_average(current.layout.params)
        else:
            while current.started < len(current.layout.buckets):
                self.start(current)
            self.counts["gradient_buckets_early"] += sum(1 for w in current.works if w.is_completed())
            self.wait_all(current)
            for members, flat in zip(current.layout.buckets, current.flats):
                self.write_back([current.layout.params[i] for i in members], flat)
        self.counts["gradient_allreduce_s"] += time.monotonic() - start
        self.averaged = True

    # ------------------------------------------------------------------ inside autograd

    def ready(self, param: torch.Tensor) -> None:
        """A parameter's gradient is whole: count it; start every bucket that is full and next in order."""
        current = self.round
        if current is None or current.error is not None:
            return
        bucket = current.layout.where.get(id(param))
        if bucket is None:
            return  # a parameter of another optimizer (a backward through a network this step does not train)
        if bucket < current.started:
            current.stale = True
            return
        current.ready[bucket] += 1
        try:
            while current.started < len(current.layout.buckets) and current.ready[current.started] == len(
                current.layout.buckets[current.started]
            ):
                start = time.monotonic()
                self.start(current)
                self.counts["gradient_allreduce_s"] += time.monotonic() - start
        except BaseException as exc:  # raised from finish, on the learner's own terms, not through autograd
            current.error = exc

    # ------------------------------------------------------------------ the collectives

    def start(self, current: Round) -> None:
        members = current.layout.buckets[current.started]
        flat = self.flatten([current.layout.params[i] for i in members])
        current.flats.append(flat)
        current.works.append(self.collectives.start_sum(flat, "the gradient all-reduce"))
        current.started += 1
        self.counts["gradient_buckets"] += 1
        self.counts["gradient_allreduce_bytes"] += flat.numel() * flat.element_size()

    def wait_all(self, current: Round) -> None:
        for work in current.works:
            self.collectives.wait(work, "the gradient all-reduce")

    def flat_average(self, params: list[torch.Tensor]) -> None:
        """Every gradient in one all-reduce after backward."""
        flat = self.flatten(params)
        self.reduce_flat(flat)
        self.write_back(params, flat)

    def reduce_flat(self, flat: torch.Tensor) -> None:
        """One all-reduce of `flat` (summed in place), waited for and counted as one bucket."""
        self.collectives.wait(self.collectives.start_sum(flat, "the gradient all-reduce"), "the gradient all-reduce")
        self.counts["gradient_buckets"] += 1
        self.counts["gradient_allreduce_bytes"] += flat.numel() * flat.element_size()

    def flatten(self, params: list[torch.Tensor]) -> torch.Tensor:
        device = self.collectives.device
        parts = [
            p.grad.detach().reshape(-1).to(device, torch.float32)
            if p.grad is not None
            else torch.zeros(p.numel(), dtype=torch.float32, device=device)  # no gradient here: counts as zero
            for p in params
        ]
        return torch.cat(parts)

    def write_back(self, params: list[torch.Tensor], flat: torch.Tensor) -> None:
        # a parameter without a gradient here may have one on another replica: every replica steps it with the mean
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        spread_mean(flat, self.collectives.world_size, [p.numel() for p in params], [p.grad for p in params])

    def take_averaged(self) -> bool:
        """Whether the gradients about to be stepped are already averaged (then the optimizer's own hook passes)."""
        averaged, self.averaged = self.averaged, False
        return averaged

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.hooked.clear()
        self.round = None


@torch.no_grad()
def spread_mean(flat: torch.Tensor, world_size: int, sizes: list[int], targets: list[torch.Tensor | None]) -> None:
    """The sum `flat` divided by the group's size, copied piece by piece into `targets` (None: skipped)."""
    flat /= world_size
    offset = 0
    for n, target in zip(sizes, targets):
        if target is not None:
            target.copy_(flat[offset : offset + n].view_as(target))
        offset += n
