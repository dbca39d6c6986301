"""The run's curves: `run.dir/metrics.jsonl`, a flat JSON object per record, and TensorBoard scalars when installed."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
# Figures that are labels or repeat another record's content, not curves.
SKIPPED = {"actor_version_min", "eval_version", "condition_met_unix"}


def flatten(figures: dict[str, Any], prefix: str = "") -> dict[str, float | int]:
    """`{"policies": {"a": {"eval_return": 1}}}` -> `{"policies/a/eval_return": 1}`; numbers only (no NaN, None)."""
    out: dict[str, float | int] = {}
    for key, value in figures.items():
        if not prefix and key in SKIPPED:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            out[name] = value
    return out


def open_tensorboard(directory: Path):
    """An event-file writer from the `tensorboard` package itself (no torch in the supervisor), or None."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        log.info(
            "tensorboard is not installed: the run's curves go to metrics.jsonl only "
            "(pip install 'tandem[tensorboard]' for TensorBoard event files)"
        )
        return None
    return _TensorBoard(EventFileWriter(str(directory)), Event, Summary)


class _TensorBoard:
    def __init__(self, writer, event_cls, summary_cls):
        self.writer, self.event_cls, self.summary_cls = writer, event_cls, summary_cls

    def add(self, wall_time: float, step: int, scalars: dict[str, float | int]) -> None:
        values = [self.summary_cls.Value(tag=tag, simple_value=float(v)) for tag, v in scalars.items()]
        self.writer.add_event(self.event_cls(wall_time=wall_time, step=step, summary=self.summary_cls(value=values)))

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class RunMetricsLog:
    """Appends a record per `write()` to metrics.jsonl and flushes it; mirrors to TensorBoard against env steps.

    Nothing is kept in memory: each record goes to the file (and the event writer's bounded queue) at once.
    """

    def __init__(self, directory: Path, tensorboard: bool = True, wandb: Any = None):
        self.path = directory / "metrics.jsonl"
        self.file = self.path.open("a", encoding="utf-8")
        self.tensorboard = open_tensorboard(directory / "tensorboard") if tensorboard else None
        self.wandb = wandb  # a WandbSink, with [tracking] wandb = true
        self.records = 0

    def write(self, figures: dict[str, Any], wall_time: float | None = None) -> None:
        wall_time = time.time() if wall_time is None else wall_time
        scalars = flatten(figures)
        record = {"time": round(wall_time, 3), **scalars}
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        self.records += 1
        step = int(scalars.get("env_steps", 0))
        curves = {k: v for k, v in scalars.items() if k != "env_steps"}
        if self.tensorboard is not None:
            self.tensorboard.add(wall_time, step, curves)
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.add(step, curves)

    def close(self) -> None:
        self.file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.close()
