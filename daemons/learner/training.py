"""A learner's training step: a batch from its feed (or the prefetcher), one update, and what the update said."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tandem.daemons.algorithms import make_algorithm, make_feed
from tandem.daemons.algorithms.base import Feed
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.learner.augment import UnrollAugment
from tandem.daemons.learner.content import BatchContentCheck
from tandem.daemons.learner.prefetch import Prefetcher
from tandem.daemons.runtime.time_split import TimeSplit
from tandem.daemons.settings.schema import RunConfig


@dataclass(frozen=True)
class ReadyBatch:
    """A batch taken from the feed, and what the update trains on: with learner.augment its copies too, and in the
    algorithm's own prepared form when it has one (Algorithm.prepare: tensors on the device, targets ...)."""

    taken: Any  # what the feed gave: its after_update and lag figures see this
    trained_on: Any


class Training:
    """The algorithm and the feed it learns from, and the check a batch must pass to go into that feed.

    The feed is shared with the intake (on its own thread with learner.intake_thread) and the prefetcher:
    every call into it holds `feed_lock`, the update itself does not. `heartbeat` is called between the
    steps of a long update (see Algorithm.progress), so a slow one does not look like a hung learner.
    """

    def __init__(
        self,
        config: RunConfig,
        spaces: PolicySpaces,
        device: str,
        counts: dict[str, float],
        heartbeat: Callable,
        split: TimeSplit | None = None,
    ):
        obs_space, action_space = spaces.observation_space, spaces.action_space
        self.algorithm = make_algorithm(config, obs_space, action_space, device, mask_size=spaces.mask_size)
        if hasattr(self.algorithm, "progress"):
            self.algorithm.progress = heartbeat
        self.feed: Feed = make_feed(config, obs_space, action_space)
        self.feed_lock = threading.Lock()
        # the policy's whole contract, whatever the algorithm checks: the actors send what this config says
        self.check_content = BatchContentCheck.of_space(
            obs_space, self.algorithm.check_batch, action_space, config.model.core_state_size()
        )
        self.device, self.counts = device, counts
        self.prefetcher: Prefetcher | None = None
        self.last_metrics: dict[str, float] = {}  # the last update's diagnostics (loss, entropy, KL, ...)
        self.augment = UnrollAugment(config.learner.augment) if config.learner.augment else None
        self.split = split or TimeSplit()  # where the time goes: taking and preparing a batch, the update
        self.prepare = getattr(self.algorithm, "prepare", None)  # optional: see ReadyBatch

    @property
    def consumed_per_update(self) -> float:
        return self.feed.consumed_per_update

    def fill(self) -> float:
        """How full the feed is (0 empty .. 1 full)."""
        with self.feed_lock:
            return self.feed.fill()

    def start_prefetch(self, current_version: Callable[[], int]) -> None:
        """learner.prefetch: replay batches sampled one update ahead, on a thread (where the feed allows it)."""
        if self.feed.can_prefetch:
            self.prefetcher = Prefetcher(self.feed, self.feed_lock, self.device, current_version)
            self.prefetcher.start()

    def stop_prefetch(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.stop()

    def step(self, version: int) -> bool:
        """One update with the next batch, if one is ready (False if not); counted in `updates`."""
        ready = self.next_payload(version)
        if ready is None:
            return False
        self.train(ready, version)
        return True

    def next_payload(self, version: int) -> ReadyBatch | None:
        """The next batch to train on (from the prefetcher when there is one), or None when none is ready."""
        with self.split.timing("prepare"):
            if self.prefetcher is not None:
                taken = self.prefetcher.next()
            else:
                with self.feed_lock:
                    taken = self.feed.next_batch(version)
            if taken is None:
                return None
            # the copies are trained on only: the feed and its lag figures see the unrolls that came
            trained_on = self.augment(taken) if self.augment else taken
            return ReadyBatch(taken, self.prepare(trained_on) if self.prepare is not None else trained_on)

    def train(self, ready: ReadyBatch, version: int) -> None:
        """One update with `ready`, and what it said; counted in `updates`."""
        with self.split.timing("compute"):
            result = self.algorithm.update(ready.trained_on)
        with self.feed_lock:
            self.feed.after_update(ready.taken, result)
        self.counts["updates"] += 1
        self.last_metrics = {k: float(v) for k, v in result.metrics.items()}
        self.last_metrics["sample_lag_mean"] = self.feed.lag_of(ready.taken, version)
