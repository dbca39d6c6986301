"""Resident memory of a local child, read from the kernel between heartbeats so a fast leak is caught near its limit."""

from __future__ import annotations

import os

import psutil

READ_EVERY_S = 0.2  # a heartbeat comes once a second: a leak of a few hundred MB/s overshot a limit by a quarter
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_rss_bytes(pid: int) -> int | None:
    """The process's resident set size now, or None when it is gone or cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:  # one small read: cheap enough for every child each 0.2 s
            return int(statm.read().split()[1]) * PAGE_BYTES
    except FileNotFoundError:
        if not os.path.isdir("/proc"):  # not Linux: psutil knows the platform's way
            try:
                return int(psutil.Process(pid).memory_info().rss)
            except (psutil.Error, OSError):
                return None
        return None
    except (OSError, ValueError, IndexError):
        return None


class ChildMemory:
    """The newest RSS of one local child: read at most every READ_EVERY_S, else the last read."""

    def __init__(self) -> None:
        self.read_at = -1e9
        self.rss: int | None = None

    def current(self, pid: int | None, now: float) -> int | None:
        if pid is None:
            return None
        if now - self.read_at >= READ_EVERY_S:
            self.read_at = now
            self.rss = read_rss_bytes(pid)
        return self.rss
