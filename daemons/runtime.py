"""What every daemon shares: logging, a stop flag set by SIGTERM/SIGINT, and a heartbeat (and systemd) reporter."""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

import psutil

from daemons.control_channel import ControlChannel
from daemons.rate_meter import RateMeter
from daemons.sd_notify import Notifier, shared
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
        # At once, whatever stage the loop is in (an env build may take a while to notice the flag).
        shared().stopping(f"stopping on {self.signal_name}")

    def __bool__(self) -> bool:
        return self.requested


# Counters worth a place in systemd's one-line STATUS=, in this order; rates are shown for the first two.
STATUS_COUNTERS = ("updates", "env_steps", "version", "episodes", "return_mean", "eval_return", "batches_dropped")
STOP_STAGES = ("checkpoint", "stopping")  # a learner checkpoints first when told to stop


def status_line(stage: str, counters: Mapping[str, int | float], rates: Mapping[str, float]) -> str:
    """`running: version 7, updates 1200 (310/s), ...`: what `systemctl status` shows as Status."""
    parts = []
    for key in STATUS_COUNTERS:
        value = counters.get(key)
        if value is None:
            continue
        text = f"{key} {value:.1f}" if isinstance(value, float) and not float(value).is_integer() else f"{key} {int(value)}"
        if key in rates:
            text += f" ({rates[key]:.0f}/s)"
        parts.append(text)
    line = f"{stage}: {', '.join(parts)}" if parts else stage
    return " ".join(line.split())  # one line, whatever a stage or counter holds


class Reporter:
    """Keeps a daemon's stage and counters and sends a Heartbeat each interval, from the caller's loop only.

    It also speaks to systemd when $NOTIFY_SOCKET is set, with or without a supervisor: READY=1 on entering
    "running", WATCHDOG=1 and STATUS= from `tick` (so only a live main loop feeds the watchdog) and
    STOPPING=1 on entering a stop stage.
    """

    def __init__(self, role: str, name: str, interval_s: float, channel: ControlChannel | None,
                 notifier: Notifier | None = None):
        self.role, self.name, self.interval_s, self.channel = role, name, interval_s, channel
        self.notifier = shared() if notifier is None else notifier
        self.incarnation = new_incarnation()
        self.process = psutil.Process()
        self.process.cpu_percent(None)  # the first call only starts the measurement
        self.host = socket.gethostname()
        self.stage = "start"
        self.stage_since = time.monotonic()
        self.counters: dict[str, int | float] = {}
        self.rates = {key: RateMeter() for key in STATUS_COUNTERS[:2]}
        self.error = ""
        self.seq = 0
        self.next_heartbeat = 0.0 if channel is not None else math.inf

    @property
    def next_beat(self) -> float:
        """When `tick` next has work: a heartbeat, or a systemd message. Loops skip building counters before."""
        return min(self.next_heartbeat, self.notifier.next_due)

    @next_beat.setter
    def next_beat(self, value: float) -> None:
        """Setting it to 0 makes the next `tick` send a heartbeat at once."""
        if self.channel is not None:
            self.next_heartbeat = value

    def set_stage(self, stage: str) -> None:
        if stage != self.stage:
            log.info("stage %s -> %s", self.stage, stage)
            self.stage, self.stage_since = stage, time.monotonic()
            self.next_beat = 0.0  # tell the supervisor at once
        if stage == "running":
            self.notifier.ready(self.status())
        elif stage in STOP_STAGES:
            self.notifier.stopping(self.status())

    def update(self, counters: Mapping[str, int | float]) -> None:
        self.counters.update({k: v for k, v in counters.items() if v is not None})

    def status(self) -> str:
        return status_line(self.stage, self.counters, {k: m.rate() for k, m in self.rates.items() if len(m.samples) > 1})

    def heartbeat(self) -> Heartbeat:
        now = time.monotonic()
        return Heartbeat(
            role=self.role, name=self.name, pid=os.getpid(), host=self.host, incarnation=self.incarnation,
            seq=self.seq, stage=self.stage, stage_elapsed_s=now - self.stage_since, counters=dict(self.counters),
            rss_bytes=int(self.process.memory_info().rss), cpu_percent=float(self.process.cpu_percent(None)),
            error=self.error,
        )

    def tick(self, now: float | None = None) -> bool:
        """Send a heartbeat if one is due (and systemd's WATCHDOG/STATUS); returns whether a heartbeat went.

        Call it from the main loop, never from another thread: a loop that hangs must go silent.
        """
        now = time.monotonic() if now is None else now
        if self.notifier.enabled and now >= self.notifier.next_due:
            for key, meter in self.rates.items():
                if key in self.counters:
                    meter.add(now, self.counters[key])
            self.notifier.tick(now, self.status())
        if self.channel is None or now < self.next_heartbeat:
            return False
        self.next_heartbeat = now + self.interval_s
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
