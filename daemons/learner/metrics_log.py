"""Scalars of a run: one JSON line per record in the run directory, and TensorBoard when it is installed."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class MetricsLog:
    """Appends `{"time": ..., "step": ..., **scalars}` to a JSONL file; mirrors to TensorBoard if available."""

    def __init__(self, path: Path, tensorboard_dir: Path | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a", encoding="utf-8")
        self.writer = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter  # needs the optional tensorboard package
            except ImportError:
                log.debug("tensorboard is not installed; scalars go to %s only", path)
            else:
                self.writer = SummaryWriter(str(tensorboard_dir))

    def write(self, step: int, scalars: dict[str, Any]) -> None:
        record = {"time": round(time.time(), 3), "step": step}
        record.update({k: v for k, v in scalars.items() if isinstance(v, (int, float)) and v == v})
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.writer is not None:
            for key, value in record.items():
                if key not in ("time", "step"):
                    self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        try:
            self.file.close()
        except OSError as exc:  # a full disk: what is still buffered is lost, the process must still end cleanly
            log.warning("metrics not all written to %s: %s", self.file.name, exc)
        if self.writer is not None:
            self.writer.close()
