"""A run directory's earlier learners' checkpoints: resumed from, or with --fresh moved aside with the curves."""

from __future__ import annotations

import re
import time
from pathlib import Path

CHECKPOINT = re.compile(r"^ckpt-(\d{12})\.pt$")  # as daemons/checkpoints/files.py names them (no torch here)
PREVIOUS = "previous"  # fresh starts move earlier learners' state under RUN_DIR/previous/<UTC time>/
# The run's curves (the supervisor's) and what `tandem plot` drew from them: a fresh run would append to them.
CURVES = ("metrics.jsonl", "tensorboard", "report.png", "report.html")


def newest_checkpoints(directory: Path) -> dict[str, tuple[int, Path]]:
    """Policy -> (version, path) of each learner's newest checkpoint file in the run directory."""
    found: dict[str, tuple[int, Path]] = {}
    for learner in sorted(directory.glob("learner-*")):
        versions = [(int(m.group(1)), p) for p in learner.iterdir() if (m := CHECKPOINT.match(p.name))]
        if versions:
            found[learner.name[len("learner-") :]] = max(versions)
    return found


def resume_message(name: str, directory: Path) -> str | None:
    """One line saying what the learners will resume from, or None for a run with nothing to resume."""
    found = newest_checkpoints(directory)
    if not found:
        return None
    parts = ", ".join(f"{policy} from version {version}" for policy, (version, _) in found.items())
    return f"resuming run {name!r} ({parts}; checkpoints in {directory}); `tandem up --fresh` starts over"


def move_previous(directory: Path) -> Path | None:
    """Move every learner's directory (checkpoints, version floor, metrics) and the run's curves under
    previous/<UTC time>/, so the fresh run's curves start on their own; returns where, or None when there was
    nothing to move. Nothing is deleted."""
    moving = sorted(directory.glob("learner-*")) + [p for name in CURVES if (p := directory / name).exists()]
    if not moving:
        return None
    target = directory / PREVIOUS / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 1
    while target.exists():  # two fresh starts within one second
        target = target.with_name(f"{target.name.split('.')[0]}.{n}")
        n += 1
    target.mkdir(parents=True)
    for path in moving:
        path.rename(target / path.name)
    return target
