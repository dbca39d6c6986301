"""The highest weight version a policy ever published, kept on disk so versions rise across learner restarts.

Checkpoints are written every few seconds, but versions are published more often: a learner restarted
from its last checkpoint must still publish versions above anything actors have already seen, or they
would ignore it. The file is tiny and rewritten (by rename) on every publish; it survives a killed process.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_floor(path: Path) -> int:
    """The last recorded version, or -1 if none (or unreadable)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return -1


def write_floor(path: Path, version: int) -> None:
    """Write `version` by rename; a write that fails (a full disk) leaves the old file and no temp file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(f"{version}\n")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
