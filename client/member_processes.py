"""Processes of one group started from Python (multiprocessing): one result each from a queue, then all ended."""

from __future__ import annotations

from typing import Any


def results_of(procs: list[Any], out: Any, timeout_s: float, grace_s: float = 10.0) -> list[Any]:
    """Start `procs`, take one result per process from `out` (each wait bounded by `timeout_s`), and end every one
    of them whatever happened: joined within `grace_s`, killed after it."""
    for proc in procs:
        proc.start()
    try:
        return [out.get(timeout=timeout_s) for _ in procs]
    finally:
        for proc in procs:
            proc.join(grace_s)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
