"""Drill: the run dir's filesystem (a small tmpfs in a private mount namespace) filled up under a running learner."""

from __future__ import annotations

import errno
import os
import shutil
import time
from pathlib import Path

from tandem.client.chaos.judge import Drill
from tandem.client.chaos.run import Run, RunFailed, rows, updates

LEARNER = "learner-default"
TMPFS_MB = 32
CHUNK = b"\0" * (1 << 20)


def mount_wrap(run_dir: Path) -> tuple[str, ...] | str:
    """The command prefix that runs `tandem up` with `run_dir` a fresh tmpfs only it sees, or why that cannot be."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root (or CAP_SYS_ADMIN); this user is not root"
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    run_dir.mkdir(parents=True, exist_ok=True)
    # a private mount namespace: the tmpfs goes away with the run, whatever happens to this process
    return (
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount -t tmpfs -o size={TMPFS_MB}m chaos-disk "$0" && exec "$@"',
        str(run_dir),
    )


def fill(path: Path) -> int:
    """Write `path` until the filesystem refuses (ENOSPC); MiB written."""
    written = 0
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(CHUNK)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written
            written += 1


def newest(run: Run) -> tuple[str, int] | None:
    files = sorted(run.path(LEARNER).glob("ckpt-*.pt"))
    return (files[-1].name, files[-1].stat().st_size) if files else None


def full_disk(run: Run, drill: Drill) -> None:
    interval = run.config.learner.checkpoint_interval_s
    watch_s = 3 * interval + 2
    drill.thresholds = {
        "tmpfs_mb": TMPFS_MB,
        "checkpoint_interval_s": interval,
        "watched_s": watch_s,
        "learner_restarts": 0,
        "disk_write_failures_min": 1,
        "last_good_checkpoint_kept": True,
    }
    data = run.wait(
        lambda d: updates(d) > 0 and rows(d)[LEARNER]["counters"].get("checkpoints", 0) >= 1,
        60 + interval,
        "training and a first checkpoint",
    )
    pid, good = rows(data)[LEARNER]["pid"], newest(run)
    filled_mb = fill(run.path("filler"))
    good = newest(run)  # the last one written before the disk filled up
    filled_at = time.monotonic()
    data = run.wait(
        lambda d: rows(d)[LEARNER]["counters"].get("disk_write_failures", 0) >= 1,
        interval + 20,
        "the learner to count a failed write",
    )
    detected = time.monotonic() - filled_at
    first = updates(data)
    while time.monotonic() - filled_at < watch_s:  # no crash loop: the learner lives on and trains
        data = run.wait(lambda d: True, 10, "status")
        if rows(data)[LEARNER]["pid"] != pid:
            break
        time.sleep(0.5)
    learner = rows(data)[LEARNER]
    kept = newest(run)
    log = run.path("logs", f"{LEARNER}.log").read_text(errors="replace")
    message = next((line for line in log.splitlines() if "dropped a write of" in line), "")
    run.path("filler").unlink()  # room again: checkpoints must resume
    try:
        resumed = run.wait(
            lambda d: rows(d)[LEARNER]["counters"].get("checkpoints", 0) > learner["counters"].get("checkpoints", 0),
            interval + 30,
            "a checkpoint once there is room",
        )
        recovered = rows(resumed)[LEARNER]["pid"] == pid
    except RunFailed:
        recovered = False
    drill.figures = {
        "filled_mb": filled_mb,
        "failure_counted_after_s": round(detected, 2),
        "disk_write_failures": learner["counters"].get("disk_write_failures", 0),
        "learner_restarts": int(learner["pid"] != pid),
        "learner_state": learner["state"],
        "learner_last_error": learner["last_error"][-400:],
        "updates_while_full": updates(data) - first,
        "last_good_checkpoint": good,
        "checkpoint_after_full": kept,
        "error_logged": message[-240:],
        "checkpoints_resumed_after_freeing": recovered,
    }
    drill.check("learner restarts == 0 (no crash loop)", learner["pid"] == pid)
    drill.check("failed writes counted", drill.figures["disk_write_failures"] >= 1)
    drill.check("a clear error in the learner's log", "No space left" in message)
    drill.check("the last good checkpoint kept", good is not None and kept == good)
    drill.check("the learner kept training while the disk was full", updates(data) > first)
    drill.check("checkpoints resume once there is room", recovered)
