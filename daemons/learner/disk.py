"""A learner's directory in the run, and what a write there that fails (a full disk) comes to: a count and a fault."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

from tandem.daemons.runtime.logs import log_dropped

log = logging.getLogger(__name__)


class LearnerDisk:
    """Where a learner writes (checkpoints, the version floor, metrics); a refused write is counted in
    `disk_write_failures`, logged (at counts 1, 2, 4, ...) and shown, never the end of training.

    Each kind of write that failed stays failing until one of its kind succeeds: while any does, the
    heartbeat's `disk_write_errno` counter holds the newest failure's errno (0: none), which the supervisor
    shows as the learner's last error and an unhealthy reason (PROTOCOL.md 2.4).
    """

    def __init__(self, directory: Path, counts: dict[str, float]):
        self.dir, self.counts = directory, counts
        self.failing: dict[str, int] = {}  # what -> errno of its last failed write, in the order they failed

    def failed(self, what: str, exc: OSError) -> None:
        self.counts["disk_write_failures"] += 1
        self.failing.pop(what, None)  # to the end: the newest failure is the one shown
        self.failing[what] = exc.errno or errno.EIO
        log_dropped(log, f"a write of {what} in {self.dir}", self.counts["disk_write_failures"], exc)

    def wrote(self, what: str) -> None:
        """A write of `what` succeeded: it is failing no longer."""
        if self.failing.pop(what, None) is not None:
            log.info("writing %s in %s works again", what, self.dir)

    def counters(self) -> dict[str, float]:
        return {"disk_write_errno": next(reversed(self.failing.values()), 0)}
