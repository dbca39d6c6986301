"""Faults a run goes on with (a disk refusing writes), and why status calls each unhealthy process unhealthy."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

DISK_ERRNO = "disk_write_errno"  # heartbeat counter: errno of the newest write still refused, 0 when none


def disk_fault(counters: Mapping[str, float]) -> str:
    """A daemon's refused disk writes as one line ("" when its writes succeed); without the count, which
    rises with every refused write, so that the same fault reads the same from one heartbeat to the next."""
    code = int(counters.get(DISK_ERRNO, 0) or 0)
    if code <= 0:
        return ""
    return f"disk writes failing: {os.strerror(code)} (errno {code}); it runs on, its log names the files"


def unhealthy_reasons(rows: Iterable[Mapping[str, Any]], own_faults: Mapping[str, str]) -> dict[str, str]:
    """Process name -> why it is unhealthy: FATAL, hung, a remote daemon gone silent, or a fault it reports;
    "supervisor" for the supervisor's own faults (its metrics.jsonl refused)."""
    reasons = {}
    for r in rows:
        if r["state"] == "FATAL":
            reasons[r["name"]] = f"FATAL: {r['last_error']}"
        elif r["hung"]:
            reasons[r["name"]] = f"hung: no heartbeat for {r['heartbeat_age_s']:.0f} s"
        elif r["state"] == "REMOTE-LOST" and r["heartbeat_age_s"] is not None:
            reasons[r["name"]] = f"silent for {r['heartbeat_age_s']:.0f} s"
        elif r.get("fault"):
            reasons[r["name"]] = r["fault"]
    if own_faults:
        reasons["supervisor"] = "; ".join(own_faults.values())
    return reasons
