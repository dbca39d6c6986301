"""Daemons started as child processes: start with a log file, poll, and stop with SIGTERM then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


def tandem_argv(*args: str) -> list[str]:
    """The command line that runs `tandem ARGS...` with this interpreter (no reliance on PATH)."""
    return [sys.executable, "-m", "client", *args]


@dataclass
class Child:
    """One daemon process; its stdout and stderr go to `log_path`."""

    name: str
    role: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, env: dict[str, str] | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=env, close_fds=True)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def poll(self) -> int | None:
        """Exit code once the process has ended, else None."""
        return self.process.poll() if self.process else None

    def signal(self, sig: int) -> None:
        if self.process and self.process.poll() is None:
            try:
                os.kill(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def log_tail(self, lines: int = 5) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


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
        if child.process is not None:
            try:
                child.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass  # unkillable (D state): reported by the caller through poll() is None
    return {c.name: c.poll() for c in children}
