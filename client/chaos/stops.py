"""Drills: SIGSTOP of an actor and of the learner: found hung against the liveness timeout, and replaced."""

from __future__ import annotations

import os
import signal
import time

import psutil

from tandem.client.chaos.judge import Drill
from tandem.client.chaos.run import Run, rows

LEARNER = "learner-default"
RSS_GROWTH_MB_MAX = 64.0  # what an actor may add while its learner is frozen: queues are bounded by HWMs


def rss_mb(pid: int) -> float | None:
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.NoSuchProcess:
        return None


def freeze(run: Run, drill: Drill, name: str, watch_pids: list[int]) -> tuple[float, float, dict[int, list[float]]]:
    """SIGSTOP `name`; seconds until the supervisor shows it hung (or gone) and until it runs again under a new
    pid, with the RSS in MiB of `watch_pids` sampled meanwhile."""
    data = run.wait(lambda d: rows(d)[name]["state"] == "RUNNING", 60, f"{name} running")
    pid = rows(data)[name]["pid"]
    samples: dict[int, list[float]] = {p: [v] for p in watch_pids if (v := rss_mb(p)) is not None}
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    detected = None

    def seen(d: dict) -> bool:
        nonlocal detected
        for p in samples:
            if (v := rss_mb(p)) is not None:
                samples[p].append(v)
        row = rows(d)[name]
        if detected is None and (row["hung"] or row["pid"] != pid or row["state"] != "RUNNING"):
            detected = time.monotonic() - stopped
        return row["state"] == "RUNNING" and row["pid"] != pid

    try:
        run.wait(seen, 90, f"the stopped {name} replaced")
    finally:
        try:
            os.kill(pid, signal.SIGCONT)  # were it not replaced, leave nothing frozen behind (the run is ended anyway)
        except ProcessLookupError:
            pass
    return detected, time.monotonic() - stopped, samples


def stop_actor(run: Run, drill: Drill, actor: str = "actor-1") -> None:
    timeout = run.config.supervisor.liveness_timeout_s
    grace = run.config.supervisor.stop_grace_s
    drill.thresholds = {
        "liveness_timeout_s": timeout,
        "detect_s_max": timeout + 3.0,
        "replaced_s_max": timeout + grace + 20.0,
    }
    detected, back, _ = freeze(run, drill, actor, [])
    drill.figures = {
        "detect_s": round(detected, 2),
        "replaced_s": round(back, 2),
        "last_error": run.row(actor)["last_error"][:200],
    }
    drill.check("detected within liveness_timeout_s + 3 s", detected <= timeout + 3.0)
    drill.check("not declared hung before liveness_timeout_s", detected >= timeout - 0.5)
    drill.check("replaced within liveness_timeout_s + stop_grace_s + 20 s", back <= timeout + grace + 20.0)


def stop_learner(run: Run, drill: Drill) -> None:
    timeout = run.config.supervisor.liveness_timeout_s
    grace = run.config.supervisor.stop_grace_s
    actors = [r["pid"] for r in run.status()["processes"] if r["role"] == "actor"]
    drill.thresholds = {
        "liveness_timeout_s": timeout,
        "detect_s_max": timeout + 3.0,
        "replaced_s_max": timeout + grace + 30.0,
        "actor_rss_growth_mb_max": RSS_GROWTH_MB_MAX,
    }
    detected, back, samples = freeze(run, drill, LEARNER, actors)
    growth = {str(p): round(max(v) - v[0], 1) for p, v in samples.items()}
    drill.figures = {
        "detect_s": round(detected, 2),
        "replaced_s": round(back, 2),
        "actor_rss_mb_before": {str(p): round(v[0], 1) for p, v in samples.items()},
        "actor_rss_growth_mb": growth,
        "rss_samples": sum(len(v) for v in samples.values()),
    }
    drill.check("detected within liveness_timeout_s + 3 s", detected <= timeout + 3.0)
    drill.check("not declared hung before liveness_timeout_s", detected >= timeout - 0.5)
    drill.check("replaced within liveness_timeout_s + stop_grace_s + 30 s", back <= timeout + grace + 30.0)
    drill.check(
        f"actor RSS flat while the learner is stopped (growth <= {RSS_GROWTH_MB_MAX:g} MiB)",
        bool(growth) and max(growth.values()) <= RSS_GROWTH_MB_MAX,
    )
