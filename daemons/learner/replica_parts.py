"""What makes one learner a lone learner, replica 0 of a data-parallel group, or one of its other replicas.

The learner daemon holds the parts this module hands it and never asks its rank again:
- duties: replica 0 (and a lone learner) restores and writes checkpoints, keeps the opponent pool and publishes
  the group's weights; replicas 1..N-1 do none of that (their weights are replica 0's, bit for bit);
- a stepper: a lone learner updates whenever it has a batch; a replica updates only when every replica has
  one, so that all take the same optimizer steps (GroupStep).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem.daemons.learner.publisher import Publisher
from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.replica_join import join_group
from tandem.daemons.settings.setup_errors import SetupError

if TYPE_CHECKING:
    from tandem.daemons.learner.binding import Binding
    from tandem.daemons.learner.disk import LearnerDisk
    from tandem.daemons.learner.opponent_pool import OpponentPool
    from tandem.daemons.learner.progress import Progress
    from tandem.daemons.learner.replica_group import ReplicaGroup
    from tandem.daemons.learner.training import Training
    from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
    from tandem.daemons.runtime.signals import StopFlag
    from tandem.daemons.settings.training_sections import LearnerSection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Duties:
    """The parts of a learner's work that one process does for its whole group."""

    checkpoints: bool  # restores the newest checkpoint at start and writes them
    publishes: bool  # sends each version to the actors (and offers it to the opponent pool)
    pool_every: int  # versions between opponent-pool snapshots (0: keeps no pool)


def duties_of(rank: int, learner: LearnerSection) -> Duties:
    """Replica 0, or a lone learner, does them all; replicas 1..N-1 none. SetupError for a rank outside the group."""
    if not 0 <= rank < learner.replicas:
        raise SetupError(
            f"replica rank {rank} is outside 0..{learner.replicas - 1} (learner.replicas = {learner.replicas})"
        )
    first = rank == 0
    return Duties(checkpoints=first, publishes=first, pool_every=learner.pool_every if first else 0)


class Unpublished:
    """A replica above 0's stand-in for the Publisher: no weights socket, no snapshot thread, no version floor (its
    weights are replica 0's, which publishes them for the group; its version comes from replica 0 when they meet)."""

    def start_above(self, restored: int) -> None:
        pass

    def publish(self, frames_of_version: Callable[[], list]) -> None:
        pass  # nothing is built: replica 0 publishes the group's weights

    def send(self, frames: list) -> None:
        raise RuntimeError("a replica above 0 publishes nothing: replica 0 publishes the group's weights")

    def start(self) -> None:
        pass

    def check(self) -> None:
        pass

    def stop(self) -> None:
        pass


def publisher_for(
    duties: Duties, policy_id: str, progress: Progress, disk: LearnerDisk, binding: Binding, pool: OpponentPool
) -> Publisher | Unpublished:
    """The Publisher for the learner that publishes (replica 0, a lone learner); nothing of it for the others."""
    return Publisher(policy_id, progress, disk, binding, pool) if duties.publishes else Unpublished()


def replica_device(device: str, rank: int) -> str:
    """Plain "cuda" on a machine with several GPUs: replica R trains on GPU R (mod their count), so replicas
    started on one machine do not share one GPU. A device with an index is taken as given."""
    if device != "cuda" or rank == 0:
        return device
    import torch

    count = torch.cuda.device_count()
    return f"cuda:{rank % count}" if count > 1 else device


class LoneStep:
    """A learner alone: an update whenever its feed has a batch."""

    def step(self, training: Training, version: int) -> bool:
        return training.step(version)

    @property
    def stopping(self) -> bool:
        return False

    def close(self) -> None:
        pass


class GroupStep:
    """A replica of a data-parallel group: an update only when every replica has a batch (each keeps what it
    took meanwhile); a replica that stops takes the others out of the loop with it."""

    def __init__(self, group: ReplicaGroup, policy_id: str, stop: StopFlag):
        self.group, self.policy_id, self.stop = group, policy_id, stop
        self.held: Any = None  # a batch taken while another replica had none, trained on next
        self.stopping = False  # a replica of the group is stopping: every replica leaves its loop

    def step(self, training: Training, version: int) -> bool:
        if self.held is None:
            self.held = training.next_payload(version)
        ready, stopping = self.group.agree(self.held is not None, bool(self.stop))
        if stopping:
            self.stopping = True
            if not self.stop:  # another replica is leaving: the group ends, and the supervisor restarts it whole
                raise ReplicaError(f"another replica of policy {self.policy_id!r} is stopping: the group ends")
            return False
        if not ready:
            return False
        payload, self.held = self.held, None
        training.train(payload, version)
        self.group.after_update(training.algorithm, int(training.counts["updates"]))
        return True

    def close(self) -> None:
        self.group.close()


def join_replicas(
    runtime: DaemonRuntime,
    policy_id: str,
    rank: int,
    learner: LearnerSection,
    host: str,
    training: Training,
    progress: Progress,
    stop: StopFlag,
) -> GroupStep:
    """Meet the other replicas, then start from replica 0's state: its whole training state as it restored it
    (weights, optimizer, statistics: sent, not read from its files), bit for bit, its version and counts."""
    counts = progress.counts
    algorithm = training.algorithm
    group = join_group(
        runtime, policy_id, rank, learner.replicas, host, learner, counts, getattr(algorithm, "device", None)
    )
    group.share_state(algorithm)
    group.copy_from_first(algorithm)
    version, updates, env_steps = group.from_first(
        [progress.version, int(counts["updates"]), int(progress.env_steps_before)], "replica 0's version and counts"
    )
    progress.version, counts["updates"], progress.env_steps_before = version, updates, env_steps
    group.install()
    log.info(
        "replica %d of %d of policy %s joined generation %d", rank, learner.replicas, policy_id, group.place.generation
    )
    return GroupStep(group, policy_id, stop)
