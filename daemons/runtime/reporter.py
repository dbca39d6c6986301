"""A daemon's heartbeat (and systemd) reporter: its stage, counters, RSS and CPU, sent from its main loop."""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections.abc import Mapping

import psutil

from tandem.daemons.runtime.control_channel import ControlChannel
from tandem.daemons.runtime.rate_meter import RateMeter
from tandem.daemons.runtime.sd_notify import Notifier, shared
from tandem.protocol import Heartbeat

log = logging.getLogger(__name__)


def new_incarnation() -> int:
    """Distinct for every start of a daemon (milliseconds since the epoch, 48 bits)."""
    return int(time.time() * 1000) & ((1 << 48) - 1)


STATUS_COUNTERS = ("updates", "env_steps", "version", "episodes", "return_mean", "eval_return", "batches_dropped")
STOP_STAGES = ("checkpoint", "stopping")  # a learner checkpoints first when told to stop
TRAIN_PREFIX = "train_"  # a learner's counters named so are its last update's diagnostics (losses, entropy, KL, ...)
MAX_TRAIN_DIAGNOSTICS = 32  # a peer sending endless train_ counters cannot grow the run's curves without bound


def train_diagnostics(counters: Mapping[str, float]) -> dict[str, float]:
    """A learner heartbeat's training diagnostics, without the prefix (at most MAX_TRAIN_DIAGNOSTICS, sorted)."""
    names = sorted(k for k in counters if k.startswith(TRAIN_PREFIX))[:MAX_TRAIN_DIAGNOSTICS]
    return {k[len(TRAIN_PREFIX) :]: counters[k] for k in names}


def status_line(stage: str, counters: Mapping[str, int | float], rates: Mapping[str, float]) -> str:
    """`running: version 7, updates 1200 (310/s), ...`: what `systemctl status` shows as Status."""
    parts = []
    for key in STATUS_COUNTERS:
        value = counters.get(key)
        if value is None:
            continue
        text = (
            f"{key} {value:.1f}"
            if isinstance(value, float) and not float(value).is_integer()
            else f"{key} {int(value)}"
        )
        if key in rates:
            text += f" ({rates[key]:.0f}/s)"
        parts.append(text)
    line = f"{stage}: {', '.join(parts)}" if parts else stage
    return " ".join(line.split())  # one line, whatever a stage or counter holds


FAREWELL_LINGER_MS = 200  # long enough for a last heartbeat to leave, short enough not to slow a stop
EXPECTED_ERRORS = (ValueError, OSError, RuntimeError)  # said in their own words; others get their type's name too


def describe_error(exc: BaseException) -> str:
    """One line, at most 500 characters, naming what went wrong."""
    text = str(exc) if isinstance(exc, EXPECTED_ERRORS) and str(exc) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:500]


class Reporter:
    """Keeps a daemon's stage and counters and sends a Heartbeat each interval, from the caller's loop only.

    It also speaks to systemd when $NOTIFY_SOCKET is set, with or without a supervisor: READY=1 on entering
    "running", WATCHDOG=1 and STATUS= from `tick` (so only a live main loop feeds the watchdog) and
    STOPPING=1 on entering a stop stage.
    """

    def __init__(
        self, role: str, name: str, interval_s: float, channel: ControlChannel | None, notifier: Notifier | None = None
    ):
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

    def send_soon(self) -> None:
        """Make the next `tick` send a heartbeat, whatever the interval says (a new stage, a failure)."""
        if self.channel is not None:
            self.next_heartbeat = 0.0

    def report_now(self, now: float | None = None) -> bool:
        """Send a heartbeat now (a finished round, the way out); returns whether one went."""
        self.send_soon()
        return self.tick(now)

    def set_stage(self, stage: str) -> None:
        """Enter `stage`; after a failure the stage it failed in is kept, so status shows where it broke."""
        if self.error and stage in STOP_STAGES:
            self.notifier.stopping(self.status())
            return
        if stage != self.stage:
            log.info("stage %s -> %s", self.stage, stage)
            self.stage, self.stage_since = stage, time.monotonic()
            self.send_soon()  # tell the supervisor at once
        if stage == "running":
            self.notifier.ready(self.status())
        elif stage in STOP_STAGES:
            self.notifier.stopping(self.status())

    def close(self) -> None:
        """Send a last heartbeat now (carrying the error, if any) and close the control channel."""
        if self.channel is None:
            return
        self.report_now()
        self.channel.close(linger_ms=FAREWELL_LINGER_MS)

    def failed(self, exc: BaseException) -> None:
        """Record why the daemon is ending, for its last heartbeat (the supervisor shows it as the last error)."""
        self.error = describe_error(exc)
        self.send_soon()

    def update(self, counters: Mapping[str, int | float]) -> None:
        self.counters.update({k: v for k, v in counters.items() if v is not None})

    def status(self) -> str:
        return status_line(
            self.stage, self.counters, {k: m.rate() for k, m in self.rates.items() if len(m.samples) > 1}
        )

    def heartbeat(self) -> Heartbeat:
        now = time.monotonic()
        return Heartbeat(
            role=self.role,
            name=self.name,
            pid=os.getpid(),
            host=self.host,
            incarnation=self.incarnation,
            seq=self.seq,
            stage=self.stage,
            stage_elapsed_s=now - self.stage_since,
            counters=dict(self.counters),
            rss_bytes=int(self.process.memory_info().rss),
            cpu_percent=float(self.process.cpu_percent(None)),
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
