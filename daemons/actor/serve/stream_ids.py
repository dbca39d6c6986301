"""Stream ids no restart of an action server hands out again: each life reserves a block in a file of the run."""

from __future__ import annotations

import os
from pathlib import Path

from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.settings.schema import RunConfig

# One life's ids: more hellos than any server sees, and still 2^31 restarts before ids leave 63 bits.
BLOCK = 1 << 32


def stream_ids_file(config: RunConfig, name: str) -> Path:
    """Where a serving actor keeps the first stream id no life of it has reserved."""
    return run_dir(config) / "games" / f"{name}.streams"


def reserve_stream_ids(path: Path, block: int = BLOCK) -> range:
    """The ids this life may hand out: [first, first + block), where `path` held `first` (1 if absent).

    The file holds the first id no life has reserved and is rewritten (atomically) before any id of the
    block is used, so a server killed at any point never gives a later life an id it handed out.
    """
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        text = "1"
    if not text.isdigit() or not 1 <= int(text) < (1 << 63) - block:
        raise ValueError(
            f"{path} holds {text[:40]!r}, not the next free stream id; remove it only if no game "
            "still holds a stream of this run"
        )
    first = int(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{first + block}\n")
    os.replace(tmp, path)  # never half a number; a process restart loses nothing (no fsync: a host crash may)
    return range(first, first + block)
