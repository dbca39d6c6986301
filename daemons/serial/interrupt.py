"""SIGTERM and SIGINT end a serial run as a stop condition does (a last checkpoint and record), not mid-write."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tandem.daemons.runtime.signals import StopFlag

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals() -> Iterator[StopFlag]:
    """A StopFlag that SIGTERM and SIGINT set while the block runs; the handlers before it are put back after.

    Off the main thread (a benchmark running serial runs in a thread) no handler can be installed: the flag then
    stays clear and the process's own handling applies."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    flag.install()
    try:
        yield flag
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
