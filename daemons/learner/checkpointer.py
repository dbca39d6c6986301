"""A learner's training state on disk: restored at start, saved soon after, at its cadence, and at the stop."""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from tandem.daemons.checkpoints.files import load_latest_checkpoint, save_checkpoint
from tandem.daemons.learner.cadence import CheckpointCadence
from tandem.daemons.learner.disk import LearnerDisk
from tandem.daemons.learner.progress import Progress
from tandem.daemons.learner.training import Training

log = logging.getLogger(__name__)


class Checkpointer:
    """Saves the algorithm, the version, updates and env steps, and the replay (learner.checkpoint_replay).

    The first save comes soon after the loop starts: a learner killed before a full interval must not
    come back with random weights under a higher version. Then every `interval_s` or `every_updates`
    updates (`CheckpointCadence`), which bounds what a kill loses. A write the disk refuses is counted,
    shown and logged; the last good checkpoint stays.
    """

    def __init__(
        self,
        training: Training,
        progress: Progress,
        disk: LearnerDisk,
        interval_s: float,
        writes: bool = True,
        every_updates: int = 0,
    ):
        self.training, self.progress, self.disk = training, progress, disk
        self.writes = writes  # false: never saves or restores (replicas 1..N-1; replica 0 does for the group)
        self.cadence = CheckpointCadence(interval_s, every_updates)
        self.last_saved: float | None = None

    def restore(self) -> int:
        """Load the newest checkpoint that loads, if any; returns its version (-1 without one). A learner that keeps
        no checkpoints (replicas above 0) restores none: it takes replica 0's state when the group forms."""
        if not self.writes:
            return -1
        self.disk.dir.mkdir(parents=True, exist_ok=True)
        state = load_latest_checkpoint(self.disk.dir)
        if state is None:
            return -1
        self.training.algorithm.load_state_dict(state["algorithm"])
        self.progress.counts["updates"] = int(state.get("updates", 0))
        self.progress.env_steps_before = int(state.get("env_steps", 0))
        version = int(state.get("version", -1))
        if state.get("replay"):
            self.training.feed.load_state_dict(
                {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in state["replay"].items()}
            )
        log.info("resumed from checkpoint: version %d, %d updates", version, self.progress.counts["updates"])
        return version

    def start(self, now: float) -> None:
        self.cadence.start(now, self.updates)

    @property
    def updates(self) -> int:
        return int(self.progress.counts["updates"])

    def tick(self, now: float) -> None:
        """Save when one is due."""
        if self.writes and self.cadence.due(now, self.updates):
            self.save()

    def age_s(self) -> float:
        """Seconds since the last save; -1 before the first."""
        return time.monotonic() - self.last_saved if self.last_saved else -1.0

    def save(self) -> bool:
        """Save a checkpoint; False (counted, shown, logged) when the disk refuses it: the last good one stays."""
        if not self.writes:
            return True
        started = time.monotonic()
        try:
            self._save()
        except OSError as exc:
            self.disk.failed("a checkpoint", exc)
            return False
        else:
            self.disk.wrote("a checkpoint")
            return True
        finally:
            ended = time.monotonic()
            self.cadence.written(ended, self.updates, ended - started)

    def _save(self) -> None:
        progress, training = self.progress, self.training
        state = {
            "algorithm": training.algorithm.state_dict(),
            "version": progress.version,
            "updates": progress.counts["updates"],
            "env_steps": progress.env_steps,
        }
        with training.feed_lock:  # the receiver thread must not change replay while it is written out
            saved = training.feed.state_dict()
            if saved:
                state["replay"] = {
                    k: torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
                    for k, v in saved.items()
                }
                save_checkpoint(self.disk.dir, state)
        if not saved:
            save_checkpoint(self.disk.dir, state)
        self.progress.counts["checkpoints"] += 1
        self.last_saved = time.monotonic()

    def counters(self) -> dict[str, float]:
        """Seconds since the last save (-1 before the first) and what the last write took."""
        return {"checkpoint_age_s": self.age_s(), "checkpoint_write_s": round(self.cadence.write_s, 4)}
