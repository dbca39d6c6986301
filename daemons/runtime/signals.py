"""A stop flag set by SIGTERM/SIGINT, and dying with the parent process (no orphans when `tandem up` dies)."""

from __future__ import annotations

import os
import signal
from typing import Any

from daemons.runtime.sd_notify import shared


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


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent dies, so a killed `tandem up` leaves no orphans."""
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: the supervisor's own stop path still ends its children
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)
