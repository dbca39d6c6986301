"""What a learner reports: its heartbeat's counters, and a line of metrics.jsonl (and TensorBoard) a second."""

from __future__ import annotations

import math
from collections.abc import Callable

from tandem.daemons.learner.checkpointer import Checkpointer
from tandem.daemons.learner.disk import LearnerDisk
from tandem.daemons.learner.intake import Intake
from tandem.daemons.learner.metrics_log import MetricsLog
from tandem.daemons.learner.pace import PaceMeter
from tandem.daemons.learner.progress import Progress
from tandem.daemons.learner.training import Training
from tandem.daemons.runtime.reporter import TRAIN_PREFIX
from tandem.daemons.runtime.time_split import TimeSplit

WRITE_EVERY_S = 1.0


class LearnerMetrics:
    """The counters of every part in one dict, and one metrics.jsonl line a second (a full disk is counted)."""

    def __init__(
        self,
        progress: Progress,
        training: Training,
        pace: PaceMeter,
        checkpointer: Checkpointer,
        disk: LearnerDisk,
        extra: Callable[[], dict[str, float]] | None = None,
        split: TimeSplit | None = None,
    ):
        self.progress, self.training, self.pace = progress, training, pace
        self.checkpointer, self.disk = checkpointer, disk
        self.extra = extra  # counters of other parts (a self-play learner's pool and ratings)
        self.split = split or TimeSplit()  # the loop's time shares, a window a line
        self.log = MetricsLog(disk.dir / "metrics.jsonl", disk.dir / "tensorboard")
        self.lag_mean = 0.0  # of the transitions inserted in the last second with any
        self.next_write = 0.0

    def tick(self, now: float, intake: Intake) -> None:
        """A line when one is due, with the mean lag of what the intake inserted since the last."""
        if now < self.next_write:
            return
        lag = intake.take_lag_mean()
        if lag is not None:
            self.lag_mean = lag
        self.split.close_window()
        self.write()
        self.next_write = now + WRITE_EVERY_S

    def write(self) -> None:
        """One line of metrics.jsonl; a full disk is counted and shown, never the end of training."""
        try:
            # the diagnostics once, by their own names (the heartbeat's train_ copies are for the supervisor)
            counters = {k: v for k, v in self.counters().items() if not k.startswith(TRAIN_PREFIX)}
            # other parts' diagnostics (a self-play learner's rating) by their own names too
            extra = {k.removeprefix(TRAIN_PREFIX): v for k, v in (self.extra() if self.extra else {}).items()}
            own = {**self.training.last_metrics, **self.split.shares}
            self.log.write(self.progress.counts["updates"], {**counters, **extra, **own})
        except OSError as exc:
            self.disk.failed("the metrics", exc)
        else:
            self.disk.wrote("the metrics")

    def counters(self) -> dict[str, float]:
        training, counts, last = self.training, self.progress.counts, self.training.last_metrics
        with training.feed_lock:
            feed_counters = training.feed.counters()
        return {
            **counts,
            **feed_counters,
            **self.pace.counters(),
            "version": self.progress.version,
            "batches_stale": counts["batches_stale"] + training.feed.dropped_stale,
            "lag_mean": self.lag_mean,
            "loss": last.get("loss", 0.0),
            **self.checkpointer.counters(),
            **self.disk.counters(),
            "sample_lag_mean": last.get("sample_lag_mean", 0.0),
            # the last update's diagnostics (losses, entropy, KL, clip fraction, explained variance, ...) and where
            # the loop's time went: the supervisor puts them in the run's curves as train/NAME
            **{TRAIN_PREFIX + k: v for k, v in last.items() if math.isfinite(v)},
            **{TRAIN_PREFIX + k: v for k, v in self.split.shares.items()},
            **(self.extra() if self.extra is not None else {}),
        }

    def close(self) -> None:
        self.log.close()
