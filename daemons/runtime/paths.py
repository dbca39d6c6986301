"""Where a run keeps its files: the run directory and, inside it, each daemon's own."""

from __future__ import annotations

from pathlib import Path

from tandem.daemons.config.schema import RunConfig


def run_dir(config: RunConfig) -> Path:
    """`run.dir` with `{name}` replaced by `run.name` (relative paths are relative to the working directory)."""
    return Path(config.run.dir.replace("{name}", config.run.name))
