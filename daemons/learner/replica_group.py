"""Data-parallel learner replicas over torch.distributed: gradients averaged, weights identical, timeouts.

Every replica runs the same loop; once per pass they agree whether all of them have a batch (`agree`), and
only then do they all update, so their updates, optimizer steps and versions stay in step. Each backward pass's
gradients are averaged over the replicas before they are clipped and stepped: in buckets reduced while backward
computes the rest (gradient_buckets), through the algorithms' `gradient_step`; an optimizer stepped some other
way (a plug-in's own loop) has them averaged in one all-reduce by a pre-step hook on Tandem's Adam and on every
torch.optim optimizer. Parameters that start identical stay identical; after each update the floating buffers of
the algorithm's modules (running statistics of observations and returns) are averaged too. Every `check_every`
updates the replicas compare a checksum of all of it; a mismatch is counted and replica 0's tensors are copied
to the others.

Backends: Gloo on the CPU (gradients of a GPU learner go through host memory), or NCCL where the learners train on
CUDA devices (everything stays on the device). No collective waits without a bound: each one waits at most
`timeout_s`, then raises `ReplicaError`, and the members that are left re-form the group without the one that
died or hangs (replica_parts.GroupStep).
"""

from __future__ import annotations

import datetime
import logging
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tandem.daemons.algorithms import adam, gradient_step
from tandem.daemons.learner.gradient_buckets import GradientBuckets, spread_mean
from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.state_transfer import pack, unpack

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Place:
    """Where a replica stands: its rank, the group's size and generation, and replica 0's store (`host:port`)."""

    rank: int
    world_size: int
    generation: int
    master: str
    backend: str = "gloo"  # "nccl" where the learners train on CUDA devices


def algorithm_modules(algorithm: Any) -> list[nn.Module]:
    """The torch modules an algorithm holds as attributes (its networks, target networks, running statistics),
    in the order of their attribute names, each once."""
    found: dict[int, nn.Module] = {}
    for _, value in sorted(vars(algorithm).items()):
        if isinstance(value, nn.Module) and id(value) not in found:
            found[id(value)] = value
    return list(found.values())


def float_buffers(modules: list[nn.Module]) -> Iterator[torch.Tensor]:
    for module in modules:
        for buffer in module.buffers():
            if buffer.is_floating_point():
                yield buffer


def all_tensors(modules: list[nn.Module]) -> Iterator[torch.Tensor]:
    """Every parameter and buffer of the modules, in a fixed order (the same on every replica)."""
    for module in modules:
        yield from module.parameters()
        yield from module.buffers()


class ReplicaGroup:
    """This process's place in its policy's replica group, and the collectives the learner runs through it."""

    def __init__(
        self,
        place: Place,
        timeout_s: float,
        counts: dict[str, float],
        check_every: int = 100,
        device: torch.device | None = None,
        bucket_bytes: int = 1 << 20,
        overlap: bool = True,
    ):
        self.place, self.timeout_s, self.counts, self.check_every = place, timeout_s, counts, check_every
        self.timeout = datetime.timedelta(seconds=timeout_s)
        # where collective tensors live: the CPU for Gloo, the learner's own GPU for NCCL
        self.device = device if device is not None and place.backend == "nccl" else torch.device("cpu")
        self.world_size = place.world_size
        self.started: dict[int, float] = {}  # id of an NCCL work started here -> when (its wait is bounded from then)
        self.hooked = False
        self._torch_hook: Any = None
        counts.update(replica_rank=place.rank, replicas=place.world_size, replica_generation=place.generation)
        for key in ("collectives", "collective_wait_s", "replica_checks", "replica_mismatches"):
            counts.setdefault(key, 0)  # over the learner's life, whatever generation it trains in
        self.buckets = GradientBuckets(self, counts, bucket_bytes, overlap)

    @property
    def rank(self) -> int:
        return self.place.rank

    # ------------------------------------------------------------------ collectives, each bounded

    def start_sum(self, tensor: torch.Tensor, what: str, op: Any = None) -> Any:
        """An all-reduce (a sum, or `op`) started and not waited for; ReplicaError when even starting it fails."""
        import torch.distributed as dist

        try:
            work = dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op is None else op, async_op=True)
        except Exception as exc:  # Gloo raises RuntimeError subclasses, and others on a closed peer
            raise ReplicaError(self.failure(what, exc)) from exc
        self.started[id(work)] = time.monotonic()
        return work

    def wait(self, work: Any, what: str) -> None:
        """Wait for a started collective at most the group's timeout; ReplicaError when it fails or takes longer."""
        start = time.monotonic()
        started = self.started.pop(id(work), start)
        try:
            if self.place.backend == "nccl":
                self._wait_on_device(work, started + self.timeout_s)
            else:
                work.wait(timeout=self.timeout)
        except Exception as exc:
            raise ReplicaError(self.failure(what, exc)) from exc
        self.counted(start)

    def _wait_on_device(self, work: Any, deadline: float) -> None:
        """NCCL's wait only orders the device's stream; the host waits here, bounded from when the collective
        started (NCCL's watchdog counts from then too), for the work to complete: a hung peer would otherwise
        block the next synchronization for ever."""
        work.wait()
        while not work.is_completed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the collective did not complete within {self.timeout_s:g} s")
            time.sleep(0.0002)

    def _reduce(self, tensor: torch.Tensor, op: Any, what: str) -> None:
        self.wait(self.start_sum(tensor, what, op), what)

    def _broadcast(self, tensor: torch.Tensor, what: str) -> None:
        import torch.distributed as dist

        try:
            work = dist.broadcast(tensor, src=0, async_op=True)
        except Exception as exc:
            raise ReplicaError(self.failure(what, exc)) from exc
        self.wait(work, what)

    def _gather(self, tensor: torch.Tensor, what: str) -> list[torch.Tensor]:
        import torch.distributed as dist

        out = [torch.empty_like(tensor) for _ in range(self.place.world_size)]
        try:
            work = dist.all_gather(out, tensor, async_op=True)
        except Exception as exc:
            raise ReplicaError(self.failure(what, exc)) from exc
        self.wait(work, what)
        return out

    def counted(self, start: float) -> float:
        spent = time.monotonic() - start
        self.counts["collectives"] += 1
        self.counts["collective_wait_s"] += spent
        return spent

    def failure(self, what: str, exc: BaseException) -> str:
        return (
            f"member {self.rank} of {self.place.world_size} (generation {self.place.generation}): {what} failed "
            f"({type(exc).__name__}: {exc}); a replica died, hangs or took longer than learner.collective_timeout_s "
            f"({self.timeout_s:g} s): the group re-forms without it"
        )

    # ------------------------------------------------------------------ what the learner calls

    def agree(self, ready: bool, stopping: bool, regroup: bool = False) -> tuple[bool, bool, bool]:
        """(every member has a batch, some member is stopping, some member wants the group re-formed), the same
        answer on all: they update together or not at all, and leave the generation together."""
        import torch.distributed as dist

        # one MIN for all: "ready" as is, the others negated (min of not-stopping is 0 if any stops)
        values = [1 if ready else 0, 0 if stopping else 1, 0 if regroup else 1]
        flags = torch.tensor(values, dtype=torch.int32, device=self.device)
        self._reduce(flags, dist.ReduceOp.MIN, "the agreement to update")
        return bool(flags[0].item()), not bool(flags[1].item()), not bool(flags[2].item())

    def from_first(self, values: list[int], what: str) -> list[int]:
        """Replica 0's integers (its version, updates, env steps), the same on every replica."""
        tensor = torch.tensor(values, dtype=torch.int64, device=self.device)
        self._broadcast(tensor, what)
        return [int(v) for v in tensor.tolist()]

    def average_gradients(self, grads: list[torch.Tensor]) -> None:
        """An optimizer's pre-step hook: each gradient replaced by its mean over the replicas (one flat all-reduce),
        unless `gradient_step` had them averaged already."""
        if not grads or self.buckets.take_averaged():
            return
        start = time.monotonic()
        flat = torch.cat([g.detach().reshape(-1).to(self.device, torch.float32) for g in grads])
        self.buckets.reduce_flat(flat)
        self.counts["gradient_allreduce_s"] += time.monotonic() - start
        spread_mean(flat, self.world_size, [g.numel() for g in grads], list(grads))

    def average_buffers(self, algorithm: Any) -> None:
        """Running statistics each replica updated from its own batch, replaced by their mean over the replicas."""
        import torch.distributed as dist

        buffers = list(float_buffers(algorithm_modules(algorithm)))
        if not buffers:
            return
        flat = torch.cat([b.detach().reshape(-1).to(self.device, torch.float64) for b in buffers])
        self._reduce(flat, dist.ReduceOp.SUM, "the running-statistics all-reduce")
        flat /= self.place.world_size
        self._unflatten(flat, buffers)

    def share_state(self, algorithm: Any) -> None:
        """Replica 0's whole training state (weights, optimizer moments, statistics) loaded by every replica,
        sent as safetensors and JSON (no pickle), so a replica needs none of replica 0's files."""
        data = pack(algorithm.state_dict()) if self.rank == 0 else b""
        size = self.from_first([len(data)], "the size of replica 0's state")[0]
        buffer = (
            torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
            if self.rank == 0
            else torch.empty(size, dtype=torch.uint8, device=self.device)
        )
        self._broadcast(buffer, "the copy of replica 0's state")
        if self.rank > 0:
            algorithm.load_state_dict(unpack(buffer.cpu().numpy().tobytes()))

    def copy_from_first(self, algorithm: Any) -> None:
        """Every parameter and buffer of the algorithm's modules made replica 0's (at the group's start, after a
        mismatch)."""
        tensors = list(all_tensors(algorithm_modules(algorithm)))
        for dtype in sorted({t.dtype for t in tensors}, key=str):
            same = [t for t in tensors if t.dtype == dtype]
            flat = torch.cat([t.detach().reshape(-1).to(self.device) for t in same])
            self._broadcast(flat, "the copy of replica 0's weights")
            self._unflatten(flat, same)

    @staticmethod
    @torch.no_grad()
    def _unflatten(flat: torch.Tensor, tensors: list[torch.Tensor]) -> None:
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t))
            offset += n

    def checksum(self, algorithm: Any) -> int:
        """CRC-32 of the bytes of every parameter and buffer: equal on two replicas only if they hold the same bits."""
        crc = 0
        for t in all_tensors(algorithm_modules(algorithm)):
            crc = zlib.crc32(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes(), crc)
        return crc

    def identical(self, algorithm: Any) -> bool:
        """Compare every replica's checksum; on a mismatch (counted, logged) replica 0's tensors go to all."""
        mine = torch.tensor([self.checksum(algorithm)], dtype=torch.int64, device=self.device)
        sums = [int(t.item()) for t in self._gather(mine, "the weight comparison")]
        self.counts["replica_checks"] += 1
        if len(set(sums)) == 1:
            return True
        self.counts["replica_mismatches"] += 1
        log.warning("replica weights differ (checksums %s): copying replica 0's to every replica", sums)
        self.copy_from_first(algorithm)
        return False

    def after_update(self, algorithm: Any, updates: int) -> None:
        """What keeps the replicas identical after an update: running statistics averaged; a comparison now and then."""
        self.average_buffers(algorithm)
        if self.check_every and updates % self.check_every == 0:
            self.identical(algorithm)

    # ------------------------------------------------------------------ the gradient hooks

    def install(self) -> None:
        """Average gradients before every optimizer step in this process: bucketed and overlapped through the
        algorithms' gradient_step, and by a pre-step hook on Tandem's Adam and on torch.optim's for any other."""
        if self.hooked:
            return
        gradient_step.SYNCS.append(self.buckets)
        adam.STEP_PRE_HOOKS.append(self.average_gradients)
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def torch_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
            grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            self.average_gradients(grads)

        self._torch_hook = register_optimizer_step_pre_hook(torch_hook)
        self.hooked = True

    def close(self, failed: bool = False) -> None:
        """Remove the hooks and leave the group (no collective: the others may be gone already). After a failure
        an NCCL group is aborted, not destroyed: destroying waits for its queued collectives, which a lost peer
        never completes."""
        if self.hooked:
            gradient_step.SYNCS.remove(self.buckets)
            adam.STEP_PRE_HOOKS.remove(self.average_gradients)
            self._torch_hook.remove()
            self.buckets.close()
            self.hooked = False
        import torch.distributed as dist

        if dist.is_initialized():
            try:
                abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
                if failed and self.place.backend == "nccl" and abort is not None:
                    abort()
                else:
                    dist.destroy_process_group()
            except Exception as exc:  # a broken group may refuse even this; the process is ending anyway
                log.debug("leaving the replica group: %s", exc)
