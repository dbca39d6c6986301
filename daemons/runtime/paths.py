"""Where a run keeps its files: the run directory and, inside it, each daemon's own."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tandem.daemons.settings.schema import RunConfig


def run_dir(config: RunConfig) -> Path:
    """`run.dir` with `{name}` replaced by `run.name` (relative paths are relative to the working directory)."""
    return Path(config.run.dir.replace("{name}", config.run.name))


def unwritable_dir(directory: Path) -> str | None:
    """Why a process here could not make and write `directory`, or None. The folder the missing ones would be
    made in is tried for real (a folder made there and removed at once): permissions alone miss a read-only
    mount, and say yes to root everywhere."""
    path = directory.absolute()
    nearest = path
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        return f"{nearest} is not a folder"
    try:
        with tempfile.TemporaryDirectory(prefix=".tandem-write-check-", dir=nearest):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc)
        return f"{nearest}: {why}" + ("" if nearest == path else f", so {path} cannot be made")
    return None
