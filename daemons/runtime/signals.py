"""A stop flag set by SIGTERM/SIGINT, and dying with the parent process (no orphans when `tandem up` dies)."""

from __future__ import annotations

import os
import select
import signal
import threading
from typing import Any

from tandem.daemons.runtime.sd_notify import shared


class StopFlag:
    """Set by SIGTERM or SIGINT; main loops check it between steps instead of dying mid-write."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = ""

    def install(self) -> StopFlag:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        self.requested = True
        self.signal_name = signal.Signals(signum).name
        # At once, whatever stage the loop is in (an env build may take a while to notice the flag).
        shared().stopping(f"stopping on {self.signal_name}")

    def __bool__(self) -> bool:
        return self.requested


# Counters worth a place in systemd's one-line STATUS=, in this order; rates are shown for the first two.


def die_with_parent(supervisor_pid: int | None = None) -> None:
    """Ask Linux to SIGTERM this process when its parent dies, so a killed `tandem up` leaves no orphans.

    Children of `tandem up` are forked by a forkserver, so their parent is that server, not the supervisor,
    and the server outlives a SIGKILLed supervisor. With `supervisor_pid`, a thread also watches the
    supervisor itself and, when it is gone, ends the forkserver (whose other children then get their
    death signal) and this process, which stops as on any SIGTERM (a learner checkpoints).
    """
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: the supervisor's own stop path still ends its children
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)
    if supervisor_pid is not None and supervisor_pid != parent:
        threading.Thread(target=_watch_supervisor, args=(supervisor_pid,), name="watch-supervisor", daemon=True).start()


WATCH_POLL_MS = 1000  # how often the watcher wakes to check again (a pidfd wakes it at once anyway)


def _watch_supervisor(pid: int) -> None:
    wait_for_exit(pid)
    forkserver = os.getppid()
    if forkserver not in (1, pid):
        try:
            os.kill(forkserver, signal.SIGTERM)
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGTERM)


def wait_for_exit(pid: int) -> None:
    """Return once process `pid` has ended (a pidfd, so a reused pid cannot fool it; polling where none)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):
        fd = None
    try:
        poller = select.poll()
        if fd is not None:
            poller.register(fd, select.POLLIN)
        while True:
            if fd is not None:
                if poller.poll(WATCH_POLL_MS):
                    return
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            except PermissionError:
                pass  # alive, owned by someone else
            poller.poll(WATCH_POLL_MS)  # a plain sleep with a bound
    finally:
        if fd is not None:
            os.close(fd)
