"""A learner's opponent pool for self-play: every K-th published version kept on disk, the newest N of them.

Each kept version is the weight blob's frames exactly as they were published, in one file of the learner's
`pool/` folder, so a restarted learner serves the same pool and an actor checks a pooled blob as it checks
any other (the checksum). Nothing of the pool stays in memory but the list of its versions; the snapshot
thread reads a version's file when an actor asks for it (PROTOCOL.md 2.3).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from pathlib import Path

from tandem.daemons.learner.ratings import PoolRatings
from tandem.protocol import ProtocolError, WeightBlob

log = logging.getLogger(__name__)
NAME = re.compile(r"v(\d+)\.blob")
FRAME_COUNT = struct.Struct("<I")
FRAME_SIZE = struct.Struct("<Q")
MAX_FRAMES = 1 << 16  # a pool file claiming more frames than a blob can have is not one
POOL_COUNTS = (
    "pool_snapshots_saved",
    "pool_snapshots_removed",
    "pool_snapshots_damaged",
    "pool_snapshots_served",
    "pool_requests_refused",
)


class OpponentPool:
    """Versions `v` with `v % every == 0` as they are published, at most `size` of them (oldest removed first).

    `versions` is replaced whole, never changed in place, so the snapshot thread reads it without a lock; a file
    removed while that thread opens it reads as absent.
    """

    def __init__(self, folder: Path, every: int, size: int, counts: dict[str, float]):
        self.folder, self.every, self.size, self.counts = folder, every, size, counts
        self.versions: tuple[int, ...] = ()
        self.ratings: PoolRatings | None = None
        if self.enabled:  # a learner without a pool reports none of these
            for name in POOL_COUNTS:
                counts.setdefault(name, 0)
            self.ratings = PoolRatings()

    @property
    def enabled(self) -> bool:
        return self.every > 0

    def load(self) -> None:
        """The versions a previous run of this learner kept: each file checked as a blob; a damaged one removed."""
        if not self.enabled or not self.folder.is_dir():
            return
        kept = []
        for path in self.folder.iterdir():
            match = NAME.fullmatch(path.name)
            if match is None:
                continue
            try:
                blob = WeightBlob.from_frames(read_frames(path))
                blob.verify_checksum()
                if blob.version != int(match.group(1)):
                    raise ProtocolError(f"holds version {blob.version}", "version")
            except (OSError, ValueError, ProtocolError) as exc:
                self.counts["pool_snapshots_damaged"] += 1
                log.warning("opponent pool: %s is not a sound weight blob (%s); removed", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            kept.append(blob.version)
        self.versions = tuple(sorted(kept))
        self.trim()
        for version in self.versions:  # ratings start afresh with each run of the learner (not checkpointed)
            self.ratings.pooled(version)

    def offer(self, version: int, frames: list) -> bool:
        """Keep `version` (its published frames) when it is due; True when it was written."""
        if not self.enabled or version % self.every or version in self.versions:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(version)
        partial = path.with_suffix(".partial")
        with partial.open("wb") as out:
            write_frames(out, frames)
        os.replace(partial, path)  # a reader never sees half a file
        self.versions = (*self.versions, version)
        self.counts["pool_snapshots_saved"] += 1
        self.ratings.pooled(version)
        self.trim()
        return True

    def trim(self) -> None:
        while len(self.versions) > self.size:
            oldest, self.versions = self.versions[0], self.versions[1:]
            self.path(oldest).unlink(missing_ok=True)
            self.counts["pool_snapshots_removed"] += 1
            if self.ratings is not None:
                self.ratings.forget(self.versions)

    def record(self, games) -> None:
        """Games an actor reported with a batch (PROTOCOL.md 2.1.6): they move the ratings."""
        if self.ratings is not None and games:
            self.ratings.record(games)

    def counters(self) -> dict[str, float]:
        """The pool's size and the ratings (none for a learner without a pool)."""
        if self.ratings is None:
            return {}
        return {"pool_size": len(self.versions), **self.ratings.counters()}

    def frames(self, version: int) -> list[bytes] | None:
        """The frames of a kept version, or None when it is not (or no longer) in the pool."""
        if version not in self.versions:
            return None
        try:
            return read_frames(self.path(version))
        except (OSError, ValueError):
            return None

    def path(self, version: int) -> Path:
        return self.folder / f"v{version}.blob"


def write_frames(out, frames: list) -> None:
    """Frames as a count, then each frame's length and bytes (little-endian)."""
    out.write(FRAME_COUNT.pack(len(frames)))
    for frame in frames:
        data = memoryview(frame).cast("B")
        out.write(FRAME_SIZE.pack(len(data)))
        out.write(data)


def read_frames(path: Path) -> list[bytes]:
    """The frames `write_frames` wrote; ValueError for a file that is cut short or not one."""
    data = path.read_bytes()
    if len(data) < FRAME_COUNT.size:
        raise ValueError("shorter than its frame count")
    (count,) = FRAME_COUNT.unpack_from(data)
    if count > MAX_FRAMES:
        raise ValueError(f"claims {count} frames")
    frames, at = [], FRAME_COUNT.size
    for _ in range(count):
        if at + FRAME_SIZE.size > len(data):
            raise ValueError("cut short")
        (size,) = FRAME_SIZE.unpack_from(data, at)
        at += FRAME_SIZE.size
        if at + size > len(data):
            raise ValueError("cut short")
        frames.append(data[at : at + size])
        at += size
    if at != len(data):
        raise ValueError("has bytes after its last frame")
    return frames
