"""Drills: a run ended by SIGTERM, SIGINT or `tandem stop`: exit code, time to exit, orphans, last checkpoint."""

from __future__ import annotations

import time

import psutil

from tandem.client.chaos.judge import Drill
from tandem.client.chaos.run import Run, live, tree
from tandem.daemons.runtime.exit_codes import ExitCode

EXPECTED = {"SIGTERM": ExitCode.INTERRUPTED, "SIGINT": ExitCode.INTERRUPTED, "stop": ExitCode.OK}
EXIT_S_MAX = 20.0  # stop_grace_s of the chaos runs is 2 s; the rest is a loaded machine's margin


def newest_checkpoint_mtime(run: Run) -> float:
    """Wall-clock mtime of the learner's newest checkpoint file (0 without one)."""
    files = list(run.path("learner-default").glob("ckpt-*.pt"))
    return max((f.stat().st_mtime for f in files), default=0.0)


def ending(run: Run, drill: Drill, how: str, expect_checkpoint: bool = True) -> None:
    drill.thresholds = {
        "exit_code": int(EXPECTED[how]),
        "exit_s_max": EXIT_S_MAX,
        "orphans": 0,
        "checkpoint_written": expect_checkpoint,
    }
    procs = tree(run.proc.pid)[1:]  # the daemons, their forkserver and resource tracker: all must go with it
    asked = time.time()
    code, took = run.end(how)
    gone, alive = psutil.wait_procs(procs, timeout=10)
    orphans = [p.pid for p in alive if live(p)]
    written = newest_checkpoint_mtime(run) >= asked - 0.01
    drill.figures = {
        "exit_code": code,
        "exit_s": round(took, 2),
        "processes_before": len(procs),
        "orphans": len(orphans),
        "checkpoint_written": written,
    }
    drill.check(f"exit code {int(EXPECTED[how])}", code == EXPECTED[how])
    drill.check(f"exited within {EXIT_S_MAX:g} s", code is not None and took <= EXIT_S_MAX)
    drill.check("orphans == 0", not orphans)
    if expect_checkpoint:
        drill.check("a checkpoint written on the way out", written)
    for pid in orphans:  # report them, then leave nothing behind
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass
