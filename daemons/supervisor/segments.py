"""Where a resumed run's curves go on from: the last record that earlier starts left in metrics.jsonl."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# The last record is about 1-3 KiB (more with many policies or agents); this holds dozens of them, so one
# cut short by a crash mid-write still leaves a whole one to read.
TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class Earlier:
    """What earlier starts of a run counted; a new start numbers itself `segment + 1` and counts on from here."""

    segment: int = 0  # how many starts wrote metrics.jsonl before this one (0: a new run)
    env_steps: int = 0
    episodes: int = 0


def count(value) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0


def earlier_starts(path: Path) -> Earlier:
    """Read from the file's last whole record; Earlier() when there is no file or no record in it.

    A file written before records carried `segment` counts as one earlier start.
    """
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except FileNotFoundError:
        return Earlier()
    lines = tail.splitlines()
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first line was entered mid-way
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:  # a line cut short when the machine went down
            continue
        if isinstance(record, dict) and "env_steps" in record:
            return Earlier(
                max(1, count(record.get("segment"))), count(record.get("env_steps")), count(record.get("episodes"))
            )
    return Earlier()
