"""One supervised process: its state machine record and all else the supervisor keeps about it, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

from tandem.daemons.main import DaemonSpec
from tandem.daemons.runtime.rate_meter import RateMeter
from tandem.daemons.runtime.stack_dump import WorkerDumps
from tandem.daemons.supervisor.child_memory import ChildMemory
from tandem.daemons.supervisor.children import Child
from tandem.daemons.supervisor.states import ProcessRecord
from tandem.protocol import Heartbeat

RATE_KEYS = ("env_steps", "updates")  # the heartbeat counters shown as rates per second


@dataclass
class Supervised:
    """A process of the run, one per name. Without a `spec` it was started elsewhere (another host, systemd, tmux):
    watched through its heartbeats and its registration, never started, signalled or restarted from here."""

    record: ProcessRecord  # the state machine's (of a process started elsewhere only its name, role and pid count)
    spec: DaemonSpec | None = None
    child: Child | None = None  # the running incarnation; None between incarnations
    beat: Heartbeat | None = None  # the current incarnation's last heartbeat
    beat_at: float | None = None  # when the last heartbeat came, whichever incarnation sent it
    rates: dict[str, RateMeter] = field(default_factory=dict)  # RATE_KEYS of the current incarnation
    worker_dumps: WorkerDumps | None = None  # a terminated daemon's env workers, asked for their stacks in turn
    memory: ChildMemory = field(default_factory=ChildMemory)  # its RSS, read from the kernel between heartbeats
    host: str = ""  # started elsewhere: the host it said it runs on
    insecure: bool = False  # started elsewhere: it registered sockets bound without authentication
    said_down: bool = False  # a learner FATAL while the run goes on: its policy was said to be down

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def managed(self) -> bool:
        """Started, restarted and stopped by this supervisor."""
        return self.spec is not None

    def new_incarnation(self) -> None:
        """It starts again and counts from zero: the last incarnation's heartbeat and rates no longer speak for it."""
        self.beat = None
        self.rates.clear()

    def heard(self, beat: Heartbeat, now: float) -> None:
        self.beat, self.beat_at = beat, now
        for key in RATE_KEYS:
            if key in beat.counters:
                self.rates.setdefault(key, RateMeter()).add(now, beat.counters[key])

    def heartbeat_age(self, now: float) -> float | None:
        return now - self.beat_at if self.beat_at is not None else None

    def rate(self, key: str) -> float | None:
        meter = self.rates.get(key)
        return round(meter.rate(), 1) if meter else None

    def signal(self, sig: int) -> None:
        if self.child is not None:
            self.child.signal(sig)
