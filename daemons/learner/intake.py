"""The learner's intake: receive, decode, check and insert batches, inline or on a thread of its own."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.runtime.worker_thread import WorkerThread
from tandem.protocol import ProtocolError, TransitionBatch, sockets

log = logging.getLogger(__name__)
MAX_BATCHES_PER_POLL = 16  # inline: at most this many batches between two training steps
POLL_MS = 50  # the thread looks at its stop event at least this often
JOIN_TIMEOUT_S = 5.0
# Why a batch counted in batches_malformed was dropped, one counter each (`malformed_<reason>`): its frames do not
# decode, its entity keys do not add up (PROTOCOL.md 2.1.7), its observations have another shape, it holds NaN
# or infinite values, or its actions (or extras, or recurrent state) do not fit the policy or the algorithm
# (`check_batch`). `insert`: it passed every check and
# still could not go in: a check is missing (a bug to report), and the batch is dropped rather than the learner.
MALFORMED_REASONS = ("frames", "entities", "obs_shape", "obs_dtype", "values", "version", "algorithm", "insert")
INTAKE_COUNTS = (
    "batches_received",
    "batches_framed",
    "batches_malformed",
    "batches_stale",
    "batches_foreign",
    "batches_over_ratio",
    "transitions_inserted",
    "transitions_received",
    "intake_errors",
    *(f"malformed_{r}" for r in MALFORMED_REASONS),
)


class BadBatch(ValueError):
    """A well-framed batch this learner cannot train on; `reason` is one of MALFORMED_REASONS."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class IntakeDied(RuntimeError):
    """The receiver thread stopped on an unexpected error: the learner must exit (the supervisor restarts it)."""


class Intake:
    """Turns received frames into feed inserts, counting every batch it drops and why.

    `feed` is shared with the training thread, which samples from it: every call into it that reads or
    changes shared state (the ring, the sum-tree, the rate limiter, the unroll queue) holds `lock`, and
    only for the insert itself; decoding, checks and the n-step arithmetic (`feed.prepare`, state of this
    side only) run without it, so they overlap an update (torch releases the GIL). `counts` is the
    learner's counter dict: this object is the only writer of the keys in INTAKE_COUNTS.
    """

    def __init__(
        self,
        feed: Any,
        lock: threading.Lock,
        policy_id: str,
        check_content: Callable[[TransitionBatch], None],
        max_lag: int,
        current_version: Callable[[], int],
        counts: dict[str, float],
        heard: Callable[[str, float], None] | None = None,
        games: Callable[[tuple], None] | None = None,
    ):
        self.feed, self.lock, self.policy_id = feed, lock, policy_id
        self.heard = heard  # told of each valid batch's actor (the pace meter counts the actors it shares among)
        self.games = games  # told of the self-play games each valid batch reports (PROTOCOL.md 2.1.6)
        self.check_content, self.max_lag, self.current_version = check_content, max_lag, current_version
        self.counts = counts
        for key in INTAKE_COUNTS:
            counts.setdefault(key, 0)
        self.lag_window = [0.0, 0]  # sum of lags and transitions since `take_lag_mean`, under `lock`
        self.worker = WorkerThread("intake", IntakeDied, on_error=self.count_error)
        self.refused = False  # the limiter refused a batch in this round of reading
        self.room = threading.Event()  # set by the training thread after each update

    # ------------------------------------------------------------------ one batch

    def handle(self, frames: list) -> None:
        """Decode and check first, so a bad batch is counted as bad whatever the limiter says; then insert."""
        try:
            batch = TransitionBatch.from_frames(frames)
        except ProtocolError as exc:
            self.count_malformed(getattr(exc, "reason", "frames"), "a malformed batch", exc)
            return
        if batch.policy_id != self.policy_id:
            self.counts["batches_foreign"] += 1
            return
        self.counts["batches_received"] += 1
        # env steps the actors spent, whatever becomes of them below (stale, over the ratio): a sample cost
        self.counts["transitions_received"] += batch.num_transitions
        if batch.framed:  # its frame stacks came as their frames, each once (PROTOCOL.md 2.1.2, 2.1.5)
            self.counts["batches_framed"] += 1
        lag = self.current_version() - batch.policy_version
        if batch.policy_version < 0 or lag > self.max_lag:
            self.counts["batches_stale"] += 1
            return
        if lag < 0:  # versions only rise, across restarts too: no actor can hold one this learner never published
            self.count_malformed(
                "version",
                "a batch of a version this learner never published",
                ValueError(f"policy_version {batch.policy_version} > {self.current_version()}"),
            )
            return
        try:
            self.check_content(batch)
        except Exception as exc:  # noqa: BLE001 - check_batch raises plain ValueErrors, a plug-in's maybe others
            self.count_malformed(getattr(exc, "reason", "algorithm"), "a batch this learner cannot train on", exc)
            return
        if self.heard is not None:
            self.heard(batch.actor_id, time.monotonic())
        if batch.games and self.games is not None:  # results stand whatever becomes of the transitions
            self.games(batch.games)
        with self.lock:
            accept = self.feed.can_accept()
        if not accept:
            self.counts["batches_over_ratio"] += 1
            self.refused = True
            return
        try:
            self.insert(batch, lag)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: a peer's batch never ends the learner
            self.count_malformed("insert", "a batch that passed every check but could not be inserted", exc)
            failed = int(self.counts["malformed_insert"])
            if failed & (failed - 1) == 0:  # the 1st, 2nd, 4th, ...: a flood cannot flood the log
                log.error("a check is missing before the insert of this batch; please report it", exc_info=exc)

    def insert(self, batch: TransitionBatch, lag: int) -> None:
        """Into the feed. Only sampling happens between the check and the insert, and sampling only makes room.
        (The replay ring checks every column before it writes one, so a refused batch leaves no half-written row.)"""
        prepared = self.feed.prepare(batch)
        with self.lock:
            self.counts["transitions_inserted"] += self.feed.insert(prepared)
            self.lag_window[0] += lag * batch.num_transitions
            self.lag_window[1] += batch.num_transitions

    def count_malformed(self, reason: str, what: str, exc: Exception) -> None:
        self.counts["batches_malformed"] += 1
        self.counts[f"malformed_{reason}"] += 1
        log_dropped(log, what, self.counts["batches_malformed"], exc)

    def take_lag_mean(self) -> float | None:
        """Mean lag on arrival of the transitions inserted since the last call (None if there were none)."""
        with self.lock:
            total, count = self.lag_window
            self.lag_window = [0.0, 0]
        return total / count if count else None

    def drain(self, sock: Any, limit: int = MAX_BATCHES_PER_POLL, timeout_ms: int = 0) -> int:
        """Handle up to `limit` waiting batches (the first after at most `timeout_ms`); how many were read.

        Reading even what cannot be inserted keeps the socket short, so what does go in is fresh.
        """
        got = 0
        while got < limit:
            frames = sockets.recv_frames(sock, timeout_ms if got == 0 else 0)
            if frames is None:
                break
            got += 1
            self.handle(frames)
        return got

    # ------------------------------------------------------------------ on a thread

    def start(self, sock: Any) -> None:
        """Hand `sock` to a receiver thread; from now on only that thread touches it (ZeroMQ sockets are not
        thread-safe), and it closes the socket when it ends."""
        self.worker.start(self._run, sock)

    @property
    def on_thread(self) -> bool:
        """Whether a receiver thread took the socket (`start`): then nothing else reads it."""
        return self.worker.started

    @property
    def thread(self) -> threading.Thread | None:
        return self.worker.thread

    def _run(self, sock: Any) -> None:
        try:
            while not self.worker.stopping:
                self.refused = False
                self.drain(sock, MAX_BATCHES_PER_POLL, POLL_MS)
                if self.refused:
                    # Training is behind its ratio: read at most a round of batches per update, so that reading
                    # and dropping a flood cannot take the CPU (and the GIL) the update needs. What waits
                    # meanwhile stays in the socket (bounded by its HWM) and is read, and counted, after it.
                    while not self.room.wait(POLL_MS / 1000) and not self.worker.stopping:
                        pass
                    self.room.clear()
        finally:
            sockets.close(sock, linger_ms=0)

    def count_error(self, exc: BaseException) -> None:
        self.counts["intake_errors"] += 1

    def made_room(self) -> None:
        """The training thread sampled: a refused receiver may read again."""
        self.room.set()

    def check(self) -> None:
        """Raise IntakeDied if the receiver thread has ended on its own (the training thread calls this)."""
        self.worker.check()

    def stop(self, timeout_s: float = JOIN_TIMEOUT_S) -> bool:
        """Ask the thread to end and wait at most `timeout_s`; False if it is still running."""
        return self.worker.stop(timeout_s)
