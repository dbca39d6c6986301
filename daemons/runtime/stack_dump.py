"""Where a hung daemon is stuck: every thread's stack on SIGUSR1, its env workers' stacks after it, and a reader.

The supervisor sends SIGUSR1 before it terminates a daemon; faulthandler writes the daemon's stacks to
stderr (its log) from C, even while Python code is stuck. A daemon whose envs run in forked workers
(`env.vector = "async"`) is usually stuck *waiting* for a worker, so its own stack says only that
(`connection.py in _recv`). The supervisor therefore signals each of the daemon's descendants in turn, a
marker line before each, and their faulthandler (inherited over fork) writes where *they* are stuck to
the same log. The daemon cannot forward the signal itself: it may arrive on any of its threads, and the
main thread, blocked reading a pipe, would never see it.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import sys
from pathlib import Path

import psutil

STACK_DUMP_SIGNAL = signal.SIGUSR1
WORKER_DUMP_GAP_S = 0.1  # between two workers: one's dump is written before the next starts (no mixed lines)
MAX_WORKERS_DUMPED = 16  # all within a short grace (a kill follows the terminate)
WORKER_BEGIN = "Stacks of env worker pid {pid}:"
WORKERS_END = "End of env worker stacks."
_WORKER_BEGIN_RE = re.compile(r"^Stacks of env worker pid (\d+):$")
_HEAD = "(most recent call first)"


def install_in_daemon() -> None:
    """faulthandler on SIGUSR1: every thread's stack to stderr, the daemon's log."""
    _register()


def install_in_worker() -> None:
    """In a forked env worker: the same, said explicitly (it writes to the stderr it shares with its daemon)."""
    _register()


def _register() -> None:
    # fd 2 itself: sys.stderr may be a stream without a file descriptor (a worker forked from a process whose
    # stderr is captured, as under a test runner), and a failed registration must not kill an env worker.
    try:
        faulthandler.register(STACK_DUMP_SIGNAL, file=sys.__stderr__ or sys.stderr, all_threads=True, chain=False)
    except (OSError, ValueError, AttributeError):
        pass


class WorkerDumps:
    """The supervisor's side: after a daemon's own dump, each of its descendants' in turn, one per `poll`
    at least WORKER_DUMP_GAP_S apart, so the supervisor's loop never sleeps for them."""

    def __init__(self, pid: int, log_path: Path, now: float):
        try:
            self.pids = [p.pid for p in psutil.Process(pid).children(recursive=True)][:MAX_WORKERS_DUMPED]
        except psutil.Error:
            self.pids = []
        self.log_path, self.next_at, self.begun = log_path, now + WORKER_DUMP_GAP_S, False

    def poll(self, now: float) -> bool:
        """Signal the next worker when due; True once every one has been asked (or there were none)."""
        if now < self.next_at:
            return not self.pids and not self.begun
        if not self.pids:
            if self.begun:
                self._say(WORKERS_END)
            return True
        pid = self.pids.pop(0)
        self._say(WORKER_BEGIN.format(pid=pid))
        self.begun = True
        try:
            os.kill(pid, STACK_DUMP_SIGNAL)
        except ProcessLookupError:
            pass  # gone since: its marker stays, with no stack under it
        self.next_at = now + WORKER_DUMP_GAP_S
        return False

    def _say(self, line: str) -> None:
        try:
            with self.log_path.open("a") as log:  # O_APPEND: never writes over the daemon's own lines
                log.write(f"\n{line}\n")
        except OSError:
            pass  # a full or missing log must not stop the supervisor


def where_stuck(log_tail: str) -> str:
    """'; at FILE:LINE in FUNC' for the daemon's main thread in the newest dump of a log, followed by
    '; env worker pid P at FILE:LINE in FUNC' for each worker dumped after it; '' without a dump.

    faulthandler lists threads newest first, so a process's main thread (its oldest) is the last block of
    its dump; "Current thread" marks whichever thread took the signal, which may be a helper thread."""
    daemon_frame, workers = "", []
    section: dict[str, str] | None = None  # the worker whose dump is being read, if any
    lines = log_tail.splitlines()
    for i, line in enumerate(lines):
        text = line.strip()
        if (begin := _WORKER_BEGIN_RE.match(text)) is not None:
            section = {"pid": begin.group(1), "frame": ""}
            workers.append(section)
        elif text == WORKERS_END:
            section = None
        elif _HEAD in text:
            frame = _frame(lines[i + 1] if i + 1 < len(lines) else "")
            if section is not None:
                section["frame"] = frame
            else:  # a newer dump of the daemon itself: the workers dumped before it are old news
                daemon_frame, workers = frame, []
    found = [f"; at {daemon_frame}"] if daemon_frame else []
    found += [f"; env worker pid {w['pid']} at {w['frame']}" for w in workers if w["frame"]]
    return "".join(found)


def _frame(line: str) -> str:
    """'FILE:LINE in FUNC' from a faulthandler frame line, '' for anything else."""
    text = line.strip()
    if not text.startswith('File "') or '", line ' not in text:
        return ""
    path, rest = text[len('File "') :].split('", line ', 1)
    number, _, func = rest.partition(" in ")
    return f"{path}:{number} in {func}"
