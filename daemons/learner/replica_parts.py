"""What makes one learner a lone learner, replica 0 of a data-parallel group, or one of its other replicas.

The learner daemon holds the parts this module hands it and never asks its rank again:
- duties: replica 0 (and a lone learner) restores and writes checkpoints, keeps the opponent pool and publishes
  the group's weights; replicas 1..N-1 do none of that (their weights are replica 0's, bit for bit);
- a stepper: a lone learner updates whenever it has a batch; a replica updates only when every member of its
  group has one, so that all take the same optimizer steps, and re-forms the group when a member is lost or a
  replica asks to join (GroupStep).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem.daemons.learner.publisher import Publisher
from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.replica_join import Meeting
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

    def take_new_generation(self) -> bool:
        return False

    @property
    def stopping(self) -> bool:
        return False

    def close(self) -> None:
        pass


class GroupStep:
    """A replica of a data-parallel group: an update only when every member has a batch (each keeps what it took
    meanwhile). A failed collective (a member lost or hung), a member leaving, or a replica asking to join makes
    the group re-form: this replica leaves its generation and meets the next one, whose first member's state every
    member takes; the learner goes on without a restart."""

    PROBE_EVERY_S = 1.0  # between two questions of the group's first member: does a replica wait to join?

    def __init__(
        self,
        meeting: Meeting,
        group: ReplicaGroup,
        policy_id: str,
        stop: StopFlag,
        training: Training,
        progress: Progress,
    ):
        self.meeting, self.group, self.policy_id, self.stop = meeting, group, policy_id, stop
        self.training, self.progress = training, progress
        self.held: Any = None  # a batch taken while another replica had none, trained on next
        self.stopping = False  # this replica is stopping: the others go on without it
        self.new_generation = True  # a generation began since the learner last asked
        self.next_probe = time.monotonic() + self.PROBE_EVERY_S
        progress.counts.setdefault("replica_reforms", 0)
        progress.counts.setdefault("replica_updates_lost", 0)

    def step(self, training: Training, version: int) -> bool:
        if self.held is None:
            self.held = training.next_payload(version)
        training_now = False
        try:
            ready, stopping, regroup = self.group.agree(self.held is not None, bool(self.stop), self.joiner_waits())
            if stopping:
                if self.stop:
                    self.stopping = True
                    return False
                self.reform("a member is leaving", lost=0)
                return False
            if regroup:
                self.reform("a replica asks to join", lost=0)
                return False
            if not ready:
                return False
            payload, self.held = self.held, None
            training_now = True
            training.train(payload, version)
            self.group.after_update(training.algorithm, int(training.counts["updates"]))
            return True
        except ReplicaError as exc:
            if self.stop:  # stopping while the group failed or re-formed: a stop like any other
                self.stopping = True
                return False
            # an update cut short in a collective: its steps so far are undone by the next generation's state
            # where this replica is not its source, and it is not counted
            self.reform(str(exc), lost=1 if training_now else 0)
            return False

    def take_new_generation(self) -> bool:
        """Whether a generation began since the last call: every member then starts a new version together (the
        actors of a lost or returning member sent data its emptied queue no longer holds; a version that made no
        update gives them fresh credit, as a new learner's would)."""
        began, self.new_generation = self.new_generation, False
        return began

    def joiner_waits(self) -> bool:
        """The group's first member asks the supervisor now and then; the agreement tells the others."""
        now = time.monotonic()
        if self.group.rank != 0 or now < self.next_probe:
            return False
        self.next_probe = now + self.PROBE_EVERY_S
        return self.meeting.probe()

    def reform(self, why: str, lost: int) -> None:
        """Leave this generation and meet the next one (bounded: ReplicaError ends the learner if none forms)."""
        counts = self.progress.counts
        counts["replica_reforms"] += 1
        counts["replica_updates_lost"] += lost
        log.warning(
            "replica %d of policy %s leaves generation %d: %s",
            self.meeting.rank,
            self.policy_id,
            self.group.place.generation,
            why,
        )
        self.group.close(failed=True)
        try:
            self.group = enter_generation(self.meeting, self.training, self.progress)
        except ReplicaError:
            if not self.stop:
                raise
            self.stopping = True  # stopped while it met the next generation: a stop like any other
            return
        self.new_generation = True
        self.meeting.runtime.reporter.set_stage("running")

    def close(self) -> None:
        self.group.close()


def enter_generation(meeting: Meeting, training: Training, progress: Progress) -> ReplicaGroup:
    """Join the next generation and take its first member's state; a generation that fails meanwhile (a member
    lost during the hand-over) is left for the next one, until the learner stops or learner.rendezvous_timeout_s
    passes without one (ReplicaError)."""
    deadline = time.monotonic() + meeting.learner.rendezvous_timeout_s
    while True:
        group = meeting.join()
        try:
            start_generation(group, training, progress)
        except ReplicaError as exc:
            group.close(failed=True)
            if meeting.runtime.stop or time.monotonic() > deadline:
                raise
            log.warning("generation %d failed while its state was handed over (%s)", group.place.generation, exc)
            continue
        meeting.trained = group.place.generation
        return group


def start_generation(group: ReplicaGroup, training: Training, progress: Progress) -> None:
    """Every member takes the generation's first member's state: its whole training state (weights, optimizer,
    statistics: sent, not read from its files), bit for bit, its version and counts; then gradients are averaged."""
    counts = progress.counts
    algorithm = training.algorithm
    group.share_state(algorithm)
    group.copy_from_first(algorithm)
    version, updates, env_steps = group.from_first(
        [progress.version, int(counts["updates"]), int(progress.env_steps_before)],
        "the first member's version and counts",
    )
    progress.version, counts["updates"], progress.env_steps_before = version, updates, env_steps
    group.install()


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
    """Meet the other replicas (at the group's first start, replica 0 with its restored checkpoint is the source
    of the state; a replica restarted later joins a group that trained on, and takes its state)."""
    algorithm = training.algorithm
    meeting = Meeting(
        runtime, policy_id, rank, learner.replicas, host, learner, progress.counts, getattr(algorithm, "device", None)
    )
    group = enter_generation(meeting, training, progress)
    log.info(
        "replica %d of policy %s joined generation %d with %d members",
        rank,
        policy_id,
        group.place.generation,
        group.place.world_size,
    )
    return GroupStep(meeting, group, policy_id, stop, training, progress)
