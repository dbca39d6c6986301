"""One drill's record: its figures, the thresholds it judged them against, and which checks failed."""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np


def spread(values: list[float]) -> dict[str, float | None]:
    """p50, p95 and max of `values` in seconds, rounded to ms (None without values)."""
    if not values:
        return {"p50_s": None, "p95_s": None, "max_s": None}
    return {
        "p50_s": round(float(np.percentile(values, 50)), 3),
        "p95_s": round(float(np.percentile(values, 95)), 3),
        "max_s": round(max(values), 3),
    }


class Drill:
    """Filled in by a drill as it goes; `record()` is what the JSON document shows of it."""

    def __init__(self, name: str):
        self.name = name
        self.figures: dict[str, Any] = {}
        self.thresholds: dict[str, Any] = {}
        self.failed: list[str] = []
        self.error: str | None = None
        self.skipped: str | None = None

    def check(self, what: str, passed: bool) -> bool:
        """Record a judged condition (`what` reads as the claim, e.g. 'restarts of the learner == 0')."""
        if not passed:
            self.failed.append(what)
        return passed

    def crashed(self, exc: BaseException) -> None:
        """The drill could not finish (the run died, a wait ran out): a failure, with where and why."""
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno}" if last else ""
        self.error = f"{type(exc).__name__}{where}: {str(exc)[-1500:]}"

    @property
    def ok(self) -> bool | None:
        if self.skipped is not None:
            return None
        return not self.failed and self.error is None

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "figures": self.figures, "thresholds": self.thresholds}
        if self.failed:
            out["failed"] = self.failed
        if self.error is not None:
            out["error"] = self.error
        if self.skipped is not None:
            out["skipped"] = self.skipped
        return out
