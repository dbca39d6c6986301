"""Supervisors and heartbeats for the supervisor's unit tests: an explicit clock, and nothing is spawned."""

from __future__ import annotations

from pathlib import Path

from tandem.daemons.config import load_config
from tandem.daemons.main import DaemonSpec
from tandem.daemons.supervisor.ports import plan_children
from tandem.daemons.supervisor.states import State
from tandem.daemons.supervisor.supervisor import Supervisor
from tandem.protocol import Heartbeat

ROOT = Path(__file__).resolve().parents[3]
PID = 100  # the pid `as_started` gives every process, and `beat` sends from


def supervisor(
    tmp_path: Path, *overrides: str, specs: list[DaemonSpec] | None = None, adopt: bool = False
) -> Supervisor:
    """A supervisor of examples/cartpole.toml with `overrides`, of `specs` (the config's own plan by default)."""
    config = load_config(ROOT / "examples" / "cartpole.toml", list(overrides))
    specs = plan_children(config) if specs is None else specs
    return Supervisor(
        config, tmp_path / "config.toml", "tcp://127.0.0.1:1", tmp_path / "logs", specs, adopt=adopt, started=0.0
    )


def as_started(sup: Supervisor, state: State = State.RUNNING) -> Supervisor:
    """Every process as if started as pid PID and now in `state` (its heartbeats from PID are its own)."""
    for proc in sup.processes.values():
        proc.record.pid, proc.record.state = PID, state
    return sup


def beat(name: str, stage: str = "running", pid: int = PID, incarnation: int = 1, **counters: float) -> Heartbeat:
    """A heartbeat of `name` (its role is the name's first word) from host "box", using 50 MiB."""
    return Heartbeat(name.split("-")[0], name, pid, "box", incarnation, 0, stage, 0.0, counters, rss_bytes=50 << 20)
