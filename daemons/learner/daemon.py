"""The learner daemon: pulls and checks batches, fills replay, trains at a held ratio, publishes and serves weights."""

from __future__ import annotations

import logging
import time

from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.learner.binding import Binding
from tandem.daemons.learner.checkpointer import Checkpointer
from tandem.daemons.learner.disk import LearnerDisk
from tandem.daemons.learner.intake import Intake
from tandem.daemons.learner.metrics import LearnerMetrics
from tandem.daemons.learner.opponent_pool import OpponentPool
from tandem.daemons.learner.pace import PaceMeter
from tandem.daemons.learner.progress import Progress
from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.replica_parts import (
    GroupStep,
    LoneStep,
    duties_of,
    join_replicas,
    publisher_for,
    replica_device,
)
from tandem.daemons.learner.training import Training
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.names import learner_name
from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.time_split import TimeSplit
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import WeightBlob, sockets

log = logging.getLogger(__name__)
IDLE_POLL_MS = 5


class Learner:
    """One learner process for one policy, a loop over its parts:

        binding      the three sockets, and where they are told to the supervisor
        intake       received batches decoded, checked and put into the feed (inline or on a thread)
        training     the algorithm and its feed: one update per step
        publisher    each new version to the actors, and to late joiners through the snapshot thread
        checkpointer the training state on disk, restored at start
        metrics      the heartbeat's counters and metrics.jsonl
        pace         the insert budget each version carries to the actors
        split        where the loop's time goes (waiting, preparing, computing, publishing), in the metrics

    `progress` (counters, version, env steps) is what they share; `run()` builds, binds and loops.
    """

    def __init__(
        self,
        config: RunConfig,
        policy_id: str,
        stop: StopFlag,
        control_endpoint: str | None,
        device: str | None = None,
        bind: str | None = None,
        insecure: bool = False,
        rank: int = 0,
        replica_port: int = 0,
    ):
        # This policy's view of the run: its own algorithm, model and learner overrides, and its own ports.
        self.config, self.policy_id, self.stop = policy_config(config, policy_id), policy_id, stop
        learner = self.config.learner
        # learner.replicas > 1: this is replica `rank`; replica 0 publishes, checkpoints and keeps the pool
        self.rank, self.duties = rank, duties_of(rank, learner)
        self.device = replica_device(device or config.learner.device, rank)
        self.runtime = DaemonRuntime("learner", learner_name(policy_id, rank), config, control_endpoint, stop)
        self.progress = Progress()
        self.split = TimeSplit()
        self.disk = LearnerDisk(run_dir(config) / self.runtime.name, self.progress.counts)
        self.pace = PaceMeter(learner.pace_headroom, expected_streams=self.config.actors.count)
        self.binding = Binding(
            self.runtime, self.config, policy_id, bind, insecure, replica_port, self.duties.publishes
        )
        self.pool = OpponentPool(
            self.disk.dir / "pool", self.duties.pool_every, learner.pool_size, self.progress.counts
        )
        # replica 0 (or a lone learner) publishes for the group; replicas above 0 hold no publishing parts at all
        self.publisher = publisher_for(self.duties, policy_id, self.progress, self.disk, self.binding, self.pool)
        self.stepper: LoneStep | GroupStep = LoneStep()  # a GroupStep once the replicas have met (join_replicas)
        self.runtime.on_close(self.binding.close)
        self.runtime.on_close(lambda: self.stepper.close())

    # ------------------------------------------------------------------ set-up

    def run(self) -> int:
        return self.runtime.run(self.main)

    def main(self) -> None:
        self.build()
        if self.config.learner.replicas > 1:
            self.stepper = join_replicas(
                self.runtime,
                self.policy_id,
                self.rank,
                self.config.learner,
                self.binding.host(),  # where this replica's sockets bind: its store (replica 0) and Gloo links too
                self.training,
                self.progress,
                self.stop,
            )
        self.binding.bind()
        self.publish()  # the first version (initial or restored weights) so actors can start at once
        self.runtime.reporter.set_stage("running")
        self.runtime.on_stop(self.last_checkpoint)
        self.loop()

    def build(self) -> None:
        cfg, reporter, progress = self.config, self.runtime.reporter, self.progress
        set_torch_threads(cfg.learner.torch_threads)
        reporter.set_stage("build")
        spaces = probe_policy_spaces(cfg, self.policy_id)
        self.training = Training(cfg, spaces, self.device, progress.counts, heartbeat=reporter.tick, split=self.split)
        feed = self.training.feed
        self.intake = Intake(
            feed,
            self.training.feed_lock,
            self.policy_id,
            self.training.check_content,
            cfg.learner.max_lag,
            lambda: progress.version,
            progress.counts,
            heard=self.pace.heard,
            games=self.pool.record,
        )
        if feed.credit_pacing and cfg.learner.pace_credit and cfg.learner.pace_headroom > 0:
            self.pace.credit_per_version = int(feed.consumed_per_update)
            feed.paced_by_credit()
        reporter.set_stage("load_checkpoint")
        self.checkpointer = Checkpointer(
            self.training,
            progress,
            self.disk,
            cfg.learner.checkpoint_interval_s,
            writes=self.duties.checkpoints,
            every_updates=cfg.learner.checkpoint_every_updates,
        )
        # replicas above 0 take replica 0's state when the group forms (join_replicas); they keep no checkpoints
        self.restored = self.checkpointer.restore()
        self.publisher.start_above(self.restored)
        self.pool.load()  # the opponents an earlier run of this learner kept
        self.metrics = LearnerMetrics(
            progress,
            self.training,
            self.pace,
            self.checkpointer,
            self.disk,
            extra=self.pool.counters,
            split=self.split,
        )
        self.runtime.on_close(self.metrics.close)

    def last_checkpoint(self) -> None:
        """On the way out, once running: a checkpoint, and the final counts (a run that ends between two
        once-a-second rows still records its last updates)."""
        self.runtime.reporter.set_stage("checkpoint")
        self.checkpointer.save()
        self.metrics.write()

    # ------------------------------------------------------------------ the loop

    def loop(self) -> None:
        """Receive, train, serve snapshots, register, checkpoint, record metrics and report, until stopped."""
        self.start_threads()
        try:
            self.loop_body()
        except ReplicaError:
            self.checkpointer.save()  # what replica 0 trained since its last checkpoint is whole: keep it
            raise
        finally:
            self.stop_threads()

    def loop_body(self) -> None:
        training, reporter = self.training, self.runtime.reporter
        self.checkpointer.start(time.monotonic())
        while not self.stop and not self.stepper.stopping:
            received = self.receive()
            fill_before = training.fill()
            trained = self.train_step()
            now = time.monotonic()
            # Starved: wanted to train and had no data.
            # The buffer's fill for this pass: the middle of its fill before and after the update.
            self.pace.tick(
                now,
                training.consumed_per_update if trained else 0.0,
                starved=not trained,
                fill=(fill_before + training.fill()) / 2,
            )
            self.publisher.check()
            self.binding.chores(now)
            self.checkpointer.tick(now)
            self.metrics.tick(now, self.intake)
            reporter.update(self.metrics.counters())
            reporter.tick(now)
            if not received and not trained:
                self.idle()

    def start_threads(self) -> None:
        """The snapshot socket on its own thread; learner.intake_thread: the receiver thread takes the transitions
        socket (this thread never touches it again); learner.prefetch: replay batches are sampled one update ahead."""
        cfg = self.config.learner
        self.publisher.start()
        if cfg.intake_thread:
            self.intake.start(self.binding.transitions_pull)
        if cfg.prefetch:
            self.training.start_prefetch(lambda: self.progress.version)

    def stop_threads(self) -> None:
        self.training.stop_prefetch()
        if self.intake.on_thread:
            self.intake.stop()
        self.publisher.stop()

    def receive(self) -> int:
        """Inline intake: up to a few waiting batches between two updates. With the receiver thread, only its
        health: a dead one fails the learner loudly (the supervisor restarts it)."""
        if self.intake.on_thread:
            self.intake.check()
            return 0
        with self.split.timing("prepare"):  # decoding and checking what came in, inline
            return self.intake.drain(self.binding.transitions_pull)

    def idle(self) -> None:
        """Nothing came in and nothing to train on: wait a moment (for a batch, with the intake inline)."""
        with self.split.timing("wait"):
            if self.intake.on_thread:
                time.sleep(IDLE_POLL_MS / 1000)
            else:
                sockets.poll([self.binding.transitions_pull], IDLE_POLL_MS)

    def train_step(self) -> bool:
        """One update if a batch is ready (False if none was), and the next version when one is due."""
        trained = self.stepper.step(self.training, self.progress.version)
        if self.stepper.take_new_generation():
            self.progress.version += 1  # every member alike: a version with no update behind it renews actors' credit
            self.publish()
        if not trained:
            return False
        self.intake.made_room()
        if self.progress.counts["updates"] % self.training.feed.publish_every == 0:
            self.progress.version += 1
            self.publish()
        return True

    def publish(self) -> None:
        """This version's weights to the actors, with the insert budget they share and the env steps behind it
        (a replica above 0 publishes nothing: replica 0 does, for the group, and its weights are the same)."""
        with self.split.timing("publish"):
            self.publisher.publish(self.version_frames)

    def version_frames(self) -> list:
        """This version's weight blob, as frames."""
        progress = self.progress
        pace_per_s, streams = self.pace.advice(time.monotonic(), filling=self.training.feed.filling())
        blob = WeightBlob.build(
            self.policy_id,
            progress.version,
            progress.counts["updates"],
            self.training.algorithm.weights(),
            pace_per_s,
            streams,
            self.pace.credit_per_version,
            env_steps=progress.env_steps,
            pool=self.pool.versions,
        )
        return blob.to_frames()
