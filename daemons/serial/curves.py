"""A serial run's metrics.jsonl: records named as an async run's supervisor names them, through its own writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tandem.daemons.runtime.rate_meter import RateMeter
from tandem.daemons.supervisor.run_metrics import RunMetricsLog

SEGMENT = 1  # a serial run never resumes (it starts from scratch, deterministic for its seed): one start


class SerialCurves:
    """Rates of env steps and updates in wall time, and a record per `write` to the run directory (none without one).

    The head of a record is `segment` then `elapsed_s`, as `tandem plot` and client/run_curves.py read it, and
    every figure an async run's record also has goes by the same name (supervisor/progress.py), so the two
    runs' curves lie on one chart."""

    def __init__(self, directory: Path | None, started: float):
        self.log = RunMetricsLog(directory) if directory is not None else None
        self.started = started
        self.env_steps_rate, self.updates_rate = RateMeter(), RateMeter()

    def sample(self, now: float, env_steps: int, updates: int) -> None:
        """Called after every round of unrolls: the rates are of the last seconds, as an async run's are."""
        self.env_steps_rate.add(now, env_steps)
        self.updates_rate.add(now, updates)

    def record(self, figures: dict[str, Any], now: float) -> dict[str, Any]:
        """`figures` (SerialRun.figures, evaluation added) under the head an async record starts with."""
        return {
            "segment": SEGMENT,
            "elapsed_s": round(now - self.started, 1),
            "env_steps": figures["env_steps"],
            "env_steps_per_s": round(self.env_steps_rate.rate(), 1),
            "updates": figures["updates"],
            "updates_per_s": round(self.updates_rate.rate(), 3),
            **figures,
        }

    def write(self, record: dict[str, Any]) -> None:
        if self.log is not None:
            self.log.write(record)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
