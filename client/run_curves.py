"""A run's metrics.jsonl as series to plot: thinned, split at each start of the run, x going on across starts."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_POINTS = 2000  # records kept per file: a week-long run is thinned to this, so drawing it stays quick
# The head of a line as the supervisor writes it (`time`, then `segment` since runs carry it, then `elapsed_s`):
# read with a regex, so a week of records is split into its starts without parsing every line as JSON.
HEAD = re.compile(rb'\{"time": [^,]*, (?:"segment": (\d+), )?"elapsed_s": ([-+.\deE]+)')


@dataclass
class Segment:
    """The records of one start of the run (a resumed run has several), and the x shift that continues the last."""

    number: int
    records: list[dict] = field(default_factory=list)
    shift: dict[str, float] = field(default_factory=dict)  # x key -> added to this segment's x values

    def start(self, x_key: str) -> float | None:
        """Where this segment begins on the x_key axis (shifted), or None when no record has x_key."""
        xs = (r[x_key] for r in self.records if isinstance(r.get(x_key), (int, float)))
        first = next(xs, None)
        return None if first is None else first + self.shift.get(x_key, 0.0)

    def end(self, x_key: str) -> float | None:
        """Where this segment ends on the x_key axis (shifted), or None when no record has x_key."""
        xs = [r[x_key] for r in self.records if isinstance(r.get(x_key), (int, float))]
        return max(xs) + self.shift.get(x_key, 0.0) if xs else None


def head(line: bytes) -> tuple[int | None, float | None]:
    """(segment, elapsed_s) of one line; (None, None) for a line that is not a whole record."""
    match = HEAD.match(line)
    if match is not None:
        return (int(match.group(1)) if match.group(1) else None), float(match.group(2))
    try:
        record = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(record, dict):
        return None, None
    segment, elapsed = record.get("segment"), record.get("elapsed_s")
    return (
        segment if isinstance(segment, int) else None,
        float(elapsed) if isinstance(elapsed, (int, float)) else None,
    )


def load(path: Path, max_points: int = MAX_POINTS) -> tuple[list[Segment], int]:
    """The run's segments and its record count; every k-th record is kept (k so that about max_points are),
    and always the first and last of each segment, so each start shows and the x shifts are exact.

    A new segment begins where `segment` changes or, in files from before it was written, where `elapsed_s`
    falls (a new start counts its seconds from 0). A line cut short or otherwise not JSON is skipped.
    """
    with path.open("rb") as f:
        total = sum(1 for _ in f)  # read twice rather than held: a week of records is most of a GiB
    stride = max(1, math.ceil(total / max_points))
    segments: list[Segment] = []
    last: tuple[int | None, float] | None = None  # the previous whole line's (segment, elapsed_s)
    passed: bytes | None = None  # the previous line, when thinning passed it over (it may end a segment)
    with path.open("rb") as f:
        for i, line in enumerate(f):
            number, elapsed = head(line)
            if elapsed is None:
                continue
            new = last is None or number != last[0] or (number is None and elapsed < last[1])
            if new:
                if passed is not None:
                    add(segments[-1], passed)
                segments.append(Segment(number if number is not None else len(segments) + 1))
            if new or i % stride == 0 or i == total - 1:
                add(segments[-1], line)
                passed = None
            else:
                passed = line
            last = (number, elapsed)
    if passed is not None:
        add(segments[-1], passed)
    continue_x(segments, ("env_steps", "elapsed_s"))
    return segments, total


def add(segment: Segment, line: bytes) -> None:
    try:
        record = json.loads(line)
    except ValueError:  # its head was whole, the rest was cut short
        return
    if isinstance(record, dict):
        segment.records.append(record)


def continue_x(segments: list[Segment], keys: tuple[str, ...]) -> None:
    """Shift each segment whose x starts below where the one before ended to start there instead.

    elapsed_s counts from 0 at each start, and env steps did too before runs carried them on: shifted, each
    curve reads left to right as the one run it is. Env steps that already go on are left as they are.
    """
    for key in keys:
        end = None
        for segment in segments:
            xs = [r[key] for r in segment.records if isinstance(r.get(key), (int, float))]
            if not xs:
                continue
            shift = end if end is not None and xs[0] < end else 0.0
            segment.shift[key] = shift
            end = xs[-1] + shift


def series(segment: Segment, wanted, x_key: str) -> dict[str, list[tuple[float, float]]]:
    """Name -> (x, y) points of this segment's numeric figures for which wanted(name) holds, x shifted."""
    shift = segment.shift.get(x_key, 0.0)
    out: dict[str, list[tuple[float, float]]] = {}
    for record in segment.records:
        x = record.get(x_key)
        if not isinstance(x, (int, float)):
            continue
        for key, value in record.items():
            if wanted(key) and isinstance(value, (int, float)) and not isinstance(value, bool):
                out.setdefault(key, []).append((float(x) + shift, float(value)))
    return out
