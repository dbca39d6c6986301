"""What every daemon shares: logging, a stop flag set by SIGTERM/SIGINT, and a heartbeat reporter."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

import psutil

from daemons.control_channel import ControlChannel
from protocol import Heartbeat

log = logging.getLogger(__name__)


def setup_logging(level: str, name: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO), stream=sys.stderr,
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
    )


def new_incarnation() -> int:
    """Distinct for every start of a daemon (milliseconds since the epoch, 48 bits)."""
    return int(time.time() * 1000) & ((1 << 48) - 1)


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

    def __bool__(self) -> bool:
        return self.requested


class Reporter:
    """Keeps a daemon's stage and counters and sends a Heartbeat each interval, from the caller's loop only."""

    def __init__(self, role: str, name: str, interval_s: float, channel: ControlChannel | None):
        self.role, self.name, self.interval_s, self.channel = role, name, interval_s, channel
        self.incarnation = new_incarnation()
        self.process = psutil.Process()
        self.process.cpu_percent(None)  # the first call only starts the measurement
        self.host = socket.gethostname()
        self.stage = "start"
        self.stage_since = time.monotonic()
        self.counters: dict[str, int | float] = {}
        self.error = ""
        self.seq = 0
        self.next_beat = 0.0

    def set_stage(self, stage: str) -> None:
        if stage != self.stage:
            log.info("stage %s -> %s", self.stage, stage)
            self.stage, self.stage_since = stage, time.monotonic()
            self.next_beat = 0.0  # tell the supervisor at once

    def update(self, counters: Mapping[str, int | float]) -> None:
        self.counters.update({k: v for k, v in counters.items() if v is not None})

    def heartbeat(self) -> Heartbeat:
        now = time.monotonic()
        return Heartbeat(
            role=self.role, name=self.name, pid=os.getpid(), host=self.host, incarnation=self.incarnation,
            seq=self.seq, stage=self.stage, stage_elapsed_s=now - self.stage_since, counters=dict(self.counters),
            rss_bytes=int(self.process.memory_info().rss), cpu_percent=float(self.process.cpu_percent(None)),
            error=self.error,
        )

    def tick(self, now: float | None = None) -> bool:
        """Send a heartbeat if one is due; returns whether it did. Call it from the main loop."""
        now = time.monotonic() if now is None else now
        if self.channel is None or now < self.next_beat:
            return False
        self.next_beat = now + self.interval_s
        self.channel.send_message(self.heartbeat())
        self.seq += 1
        self.channel.drain()
        return True


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


def log_dropped(logger: logging.Logger, what: str, count: int, reason: object) -> None:
    """Log a dropped message at counts 1, 2, 4, 8, ... so a flood of bad input cannot flood the log."""
    if count & (count - 1) == 0:
        logger.warning("dropped %s (%d so far): %s", what, count, reason)
