"""The run's curves: `run.dir/metrics.jsonl`, a flat JSON object per record, and TensorBoard scalars when installed."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tandem.daemons.supervisor.wandb_sink import WandbSink

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
    The event writer writes on a thread of its own, and once a write there failed (a full disk) it raises
    that error on every later call: it is dropped then, and a new event file is started once a record is
    appended to metrics.jsonl again (there is room again).
    """

    def __init__(self, directory: Path, tensorboard: bool = True, wandb: WandbSink | None = None):
        self.path = directory / "metrics.jsonl"
        self.file = self.path.open("a", encoding="utf-8")
        self.tensorboard_dir = directory / "tensorboard" if tensorboard else None
        self.tensorboard = open_tensorboard(self.tensorboard_dir) if self.tensorboard_dir else None
        self.tensorboard_lost = False  # dropped after a failed write, to be started again
        self.wandb = wandb  # with [tracking] wandb = true
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
        if self.tensorboard_lost:
            self.tensorboard, self.tensorboard_lost = open_tensorboard(self.tensorboard_dir), False
        if self.tensorboard is not None:
            try:
                self.tensorboard.add(wall_time, step, curves)
                self.tensorboard.flush()
            except OSError:
                self.drop_tensorboard()
                raise
        if self.wandb is not None:
            self.wandb.add(step, curves)

    def drop_tensorboard(self) -> None:
        try:
            self.tensorboard.close()
        except OSError:
            pass  # what it still holds cannot be written: the failure is counted by the caller
        self.tensorboard, self.tensorboard_lost = None, True

    def close(self) -> None:
        for what, part in (("metrics.jsonl", self.file), ("tensorboard", self.tensorboard)):
            try:
                if part is not None:
                    part.close()
            except OSError as exc:  # a full disk: what is still buffered is lost, the run must still end cleanly
                log.warning("the run's %s not all written: %s", what, exc)
        if self.wandb is not None:
            self.wandb.close()
