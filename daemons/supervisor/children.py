"""Daemons started as child processes: forked from a server that has torch loaded, stopped with SIGTERM then SIGKILL.

Importing torch takes seconds of CPU; paid by every actor on a 2-core machine it dominated a run's start.
A multiprocessing forkserver imports the daemon modules once and forks each child from that warm state.
The child calls `tandem.daemons.main.run(spec)`, as `tandem actor|learner|evaluator ...` does, with its stdout
and stderr sent to its log file.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

from tandem.daemons.main import DaemonSpec, run

PRELOAD = [
    "tandem.daemons.main",
    "tandem.daemons.actor.daemon",
    "tandem.daemons.learner.daemon",
    "tandem.daemons.evaluator.daemon",
]
_forkserver: ForkServerContext | None = None


def forkserver_context() -> ForkServerContext:
    global _forkserver
    if _forkserver is None:
        _forkserver = multiprocessing.get_context("forkserver")
        _forkserver.set_forkserver_preload(PRELOAD)
    return _forkserver


def start_forkserver() -> None:
    """Start the fork server now, without waiting for it: its seconds of `import torch` then overlap the
    supervisor's own set-up (sockets, run directory, curves) instead of following it. The first child's start
    waits for the imports to finish, as it would anyway."""
    import multiprocessing.forkserver

    forkserver_context()
    multiprocessing.forkserver.ensure_running()


def run_child(spec: DaemonSpec, log_path: str) -> None:
    """Entry point of a forked child: log to a file, then run the daemon in this process and exit with its code."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.exit(run(spec))


TAIL_BYTES = 256 * 1024  # read at most this much of a log's end for its last lines


@dataclass
class Child:
    """One daemon process running `spec`; its stdout and stderr go to `log_path`.

    Every incarnation of a daemon appends to the same log: `log_start` is where this one's output begins,
    so what it left (its last error line, its stack dump) is never taken from an earlier one.
    """

    name: str
    spec: DaemonSpec
    log_path: Path
    process: BaseProcess | None = field(default=None, repr=False)
    log_start: int = 0

    @property
    def role(self) -> str:
        return self.spec.role

    def start(self) -> None:
        self.mark_log_start()
        self.process = forkserver_context().Process(
            target=run_child, args=(self.spec, str(self.log_path)), name=self.name, daemon=False
        )
        self.process.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def poll(self) -> int | None:
        """Exit code once the process has ended (negative: killed by that signal), else None."""
        return self.process.exitcode if self.process is not None else None

    def wait(self, timeout_s: float) -> int | None:
        if self.process is None:
            return None
        self.process.join(timeout_s)
        return self.process.exitcode

    def signal(self, sig: int) -> None:
        if self.process is not None and self.poll() is None:
            try:
                os.kill(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def mark_log_start(self) -> None:
        """This incarnation's output begins where the earlier ones' ends (called before it starts)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.log_start = self.log_path.stat().st_size
        except FileNotFoundError:
            self.log_start = 0

    def log_tail(self, lines: int = 5) -> str:
        """The last `lines` lines this incarnation wrote to its log (whole lines only)."""
        try:
            with self.log_path.open("rb") as f:
                size = f.seek(0, 2)
                start = max(self.log_start, size - TAIL_BYTES)
                f.seek(start)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        found = text.splitlines()
        if start > self.log_start and found:
            found = found[1:]  # begun inside a line
        return "\n".join(found[-lines:])


def stop_all(children: Sequence[Child], grace_s: float) -> dict[str, int | None]:
    """SIGTERM every running child, SIGKILL those still alive after `grace_s`; returns exit codes."""
    for child in children:
        child.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(c.poll() is None for c in children):
        time.sleep(0.02)
    for child in children:
        if child.poll() is None:
            child.signal(signal.SIGKILL)
    for child in children:
        child.wait(5.0)  # a process in uninterruptible sleep stays; the caller sees poll() is None
    return {c.name: c.poll() for c in children}
