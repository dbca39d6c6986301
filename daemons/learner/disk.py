"""A learner's directory in the run, and what a write there that fails (a full disk) comes to: a count."""

from __future__ import annotations

import logging
from pathlib import Path

from tandem.daemons.runtime.logs import log_dropped

log = logging.getLogger(__name__)


class LearnerDisk:
    """Where a learner writes (checkpoints, the version floor, metrics); a refused write is counted in
    `disk_write_failures`, shown and logged, never the end of training."""

    def __init__(self, directory: Path, counts: dict[str, float]):
        self.dir, self.counts = directory, counts

    def failed(self, what: str, exc: OSError) -> None:
        self.counts["disk_write_failures"] += 1
        log_dropped(log, f"a write of {what} in {self.dir}", self.counts["disk_write_failures"], exc)
