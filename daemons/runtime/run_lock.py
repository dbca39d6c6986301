"""One supervisor per run directory: an flock on `RUN_DIR/supervisor.lock`; the kernel drops it when its holder dies."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = "supervisor.lock"


class RunDirBusy(RuntimeError):
    """Another live supervisor holds this run directory."""


def lock_run_dir(directory: Path) -> IO[str]:
    """Hold the run directory's lock until the returned file is closed; RunDirBusy naming the holder's pid.

    Two runs in one directory share checkpoints, the version floor and the endpoint file, and break each
    other in ways that are hard to see; refusing the second at start is the only safe answer. An flock (not
    a pid file) cannot go stale: a SIGKILLed supervisor's lock is gone with it.
    """
    path = directory / LOCK_NAME
    handle = open(path, "a+")  # noqa: SIM115 - held open for the life of the run
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunDirBusy(
            f"run directory {directory} is in use by another supervisor (pid {holder}); stop that run "
            "first (`tandem stop`) or choose another run.name or run.dir"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def gone_holder(directory: Path) -> str | None:
    """The pid `supervisor.lock` names when nothing holds the lock any more (its supervisor ended without cleaning
    up: SIGKILL, a crash, a power cut), else None: the lock is held, or there is no lock file to judge by."""
    try:
        handle = open(directory / LOCK_NAME)  # noqa: SIM115 - read-only: a run directory is never made or changed here
    except OSError:
        return None
    with handle:
        holder = handle.read().strip() or "unknown"
        if holder.isdigit() and pid_exists(int(holder)):
            return None  # the common case, answered without touching the lock
        try:  # the pid may be another host's (a shared run directory), or a new holder's not written yet
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return holder


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
