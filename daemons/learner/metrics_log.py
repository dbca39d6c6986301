"""Scalars of a run: one JSON line per record in the run directory, and TensorBoard when it is installed."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class MetricsLog:
    """Appends `{"time": ..., "step": ..., **scalars}` to a JSONL file; mirrors to TensorBoard if available.

    TensorBoard's event writer writes on a thread of its own, and once a write there failed (a full disk) it
    raises that error on every later call: the writer is dropped then, and a new event file is started once
    a JSON line is written again (there is room again).
    """

    def __init__(self, path: Path, tensorboard_dir: Path | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a", encoding="utf-8")
        self.tensorboard_dir = tensorboard_dir
        self.writer = self.open_tensorboard()
        self.writer_lost = False  # dropped after a failed write, to be started again

    def open_tensorboard(self) -> Any:
        if self.tensorboard_dir is None:
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter  # needs the optional tensorboard package
        except ImportError:
            log.debug("tensorboard is not installed; scalars go to %s only", self.file.name)
            self.tensorboard_dir = None
            return None
        return SummaryWriter(str(self.tensorboard_dir))

    def write(self, step: int, scalars: dict[str, Any]) -> None:
        record = {"time": round(time.time(), 3), "step": step}
        record.update({k: v for k, v in scalars.items() if isinstance(v, (int, float)) and v == v})
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.writer_lost:
            self.writer, self.writer_lost = self.open_tensorboard(), False
        if self.writer is not None:
            try:
                for key, value in record.items():
                    if key not in ("time", "step"):
                        self.writer.add_scalar(key, value, step)
            except OSError:
                self.drop_writer()
                raise

    def drop_writer(self) -> None:
        try:
            self.writer.close()
        except OSError:
            pass  # what it still holds cannot be written: the failure was counted
        self.writer, self.writer_lost = None, True

    def close(self) -> None:
        try:
            self.file.close()
        except OSError as exc:  # a full disk: what is still buffered is lost, the process must still end cleanly
            log.warning("metrics not all written to %s: %s", self.file.name, exc)
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError as exc:
                log.warning("tensorboard events not all written to %s: %s", self.tensorboard_dir, exc)
