"""Drills: env constructors that hang (once, always), an env that hangs in step(), and a leaking env."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from tandem.client.chaos.judge import Drill
from tandem.client.chaos.run import Run, rows, updates

LEARNER = "learner-default"
# actor-0 hangs in its first build, actor-1 in every build, actor-2 in step() after 2000 steps, actor-3 is sound
ROLES = {"hang_build_once": 0, "hang_build": 1, "hang_step": 2}
HEALTHY = "actor-3"


def overrides(markers: Path, build_deadline_s: float) -> list[str]:
    return [
        "actors.count=4",
        "env.id='tandem.client.chaos.envs:troubled'",
        f"env.kwargs.marker_dir='{markers}'",
        *(f"env.kwargs.{k}={v}" for k, v in ROLES.items()),
        "env.kwargs.hang_step_after=2000",
        f"supervisor.build_env_deadline_s={build_deadline_s}",
        "supervisor.start_token_lease_s=1.0",
        "supervisor.crash_loop_max=100",
    ]


def env_faults(run: Run, markers: Path, once: Drill, always: Drill, step: Drill) -> None:
    """One run, three faults at once; the sound actor-3 and the learner must train on through all of them."""
    sup = run.config.supervisor
    deadline = sup.build_env_deadline_s
    for d in (once, always):
        d.thresholds = {"build_env_deadline_s": deadline, "detect_s_max": deadline + 5.0, "others_restarts": 0}
    step.thresholds = {
        "liveness_timeout_s": sup.liveness_timeout_s,
        "detect_s_max": sup.liveness_timeout_s + 3.0,
        "replaced_s_max": sup.liveness_timeout_s + sup.stop_grace_s + 20.0,
    }
    # The three faults run at once, so one loop watches them all; each is timed from its marker's wall clock.
    seen: dict[str, float] = {}

    def at(marker: str) -> float | None:
        path = markers / marker
        text = path.read_text() if path.exists() else ""
        return float(text) if text else None

    def event(key: str, marker: str, happened: bool) -> None:
        if key not in seen and happened and (t := at(marker)) is not None:
            seen[key] = time.time() - t

    def watch(d: dict) -> bool:
        r = rows(d)
        event("once", "hang-build-once-0", r["actor-0"]["restarts"] >= 1)
        event("always", "hang-build-1", r["actor-1"]["state"] == "FATAL")
        step_row = r["actor-2"]
        event(
            "step_detect",
            "hang-step-2",
            step_row["hung"] or step_row["restarts"] >= 1 or step_row["state"] != "RUNNING",
        )
        event("step_back", "hang-step-2", step_row["restarts"] >= 1 and step_row["state"] == "RUNNING")
        return len(seen) == 4

    run.wait(watch, (deadline + 5) * (sup.start_retries + 2) + 60, "the three env faults detected")
    once_detect, always_fatal = seen["once"], seen["always"]
    detected, step_back = seen["step_detect"], seen["step_back"]
    data = run.wait(lambda d: rows(d)["actor-0"]["state"] == "RUNNING", 60, "actor-0 rebuilt")
    first = updates(data)
    sent = rows(data)[HEALTHY]["counters"].get("batches_sent", 0)
    data = run.wait(
        lambda d: updates(d) > first and rows(d)[HEALTHY]["counters"].get("batches_sent", 0) > sent,
        60,
        "the learner and actor-3 training on",
    )
    r = rows(data)
    others = r[HEALTHY]["restarts"] + r[LEARNER]["restarts"]
    once.figures = {
        "detect_s": round(once_detect, 2),
        "restarts": r["actor-0"]["restarts"],
        "state": r["actor-0"]["state"],
        "others_restarts": others,
        "last_error": r["actor-0"]["last_error"][-200:],
    }
    once.check("killed within build_env_deadline_s + 5 s", once_detect <= deadline + 5.0)
    once.check("rebuilt and RUNNING", r["actor-0"]["state"] == "RUNNING")
    once.check("others restarted 0 times (actor-3, learner)", others == 0)
    always.figures = {
        "fatal_after_s": round(always_fatal, 2),
        "state": r["actor-1"]["state"],
        "start_retries": sup.start_retries,
        "others_restarts": others,
        "last_error": r["actor-1"]["last_error"][-200:],
        "others_train_on": True,
    }
    always.thresholds["fatal_after_s_max"] = (deadline + 5.0) * sup.start_retries + 10.0
    always.check("FATAL after start_retries hung builds", r["actor-1"]["state"] == "FATAL")
    always.check(
        "FATAL within start_retries x (deadline + 5 s) + 10 s", always_fatal <= always.thresholds["fatal_after_s_max"]
    )
    always.check("others restarted 0 times and trained on", others == 0)
    step.figures = {
        "detect_s": round(detected, 2) if detected is not None else None,
        "replaced_s": round(step_back, 2),
        "last_error": r["actor-2"]["last_error"][-200:],
    }
    step.check(
        "hang in step() detected within liveness_timeout_s + 3 s",
        detected is not None and detected <= step.thresholds["detect_s_max"],
    )
    step.check(
        "replaced within liveness_timeout_s + stop_grace_s + 20 s", step_back <= step.thresholds["replaced_s_max"]
    )


def usage(proc: psutil.Process) -> dict[str, float]:
    return {"rss_mb": round(proc.memory_info().rss / 2**20, 1), "threads": proc.num_threads(), "fds": proc.num_fds()}


def leak(run: Run, drill: Drill, restarts: int) -> None:
    """actor-0 leaks 256 KiB a step; the supervisor recycles it at its RSS limit `restarts` times."""
    drill.thresholds = {
        "actor_rss_limit_mb": run.config.supervisor.actor_rss_limit_mb,
        "rss_growth_mb_max": 20.0,
        "threads_growth_max": 0,
        "fds_growth_max": 2,
        "learner_restarts": 0,
    }
    data = run.wait(lambda d: updates(d) > 0 and rows(d)["actor-0"]["state"] == "RUNNING", 60, "training")
    supervisor, learner = psutil.Process(run.proc.pid), psutil.Process(rows(data)[LEARNER]["pid"])
    start = rows(data)["actor-0"]["recycles"]
    before = {"supervisor": usage(supervisor), "learner": usage(learner)}
    started = time.monotonic()
    data = run.wait(
        lambda d: rows(d)["actor-0"]["recycles"] >= start + restarts,
        60 + 20 * restarts,
        f"{restarts} recycles of the leaking actor",
    )
    after = {"supervisor": usage(supervisor), "learner": usage(learner)}
    growth = {n: {k: round(after[n][k] - before[n][k], 1) for k in before[n]} for n in before}
    actor = rows(data)["actor-0"]
    drill.figures = {
        "recycles": actor["recycles"] - start,
        "seconds": round(time.monotonic() - started, 1),
        "before": before,
        "after": after,
        "growth": growth,
        "actor_state": actor["state"],
        "actor_failures": actor["restarts"] - actor["recycles"],
        "learner_restarts": int(rows(data)[LEARNER]["pid"] != learner.pid),
        "last_recycle": actor["last_recycle"][-120:],
    }
    for n in growth:
        drill.check(f"{n} RSS growth <= 20 MiB", growth[n]["rss_mb"] <= 20.0)
        drill.check(f"{n} threads not grown", growth[n]["threads"] <= 0)
        drill.check(f"{n} open files grown <= 2", growth[n]["fds"] <= 2)
    drill.check("learner restarts == 0", drill.figures["learner_restarts"] == 0)
    drill.check("the leaking actor is not FATAL", actor["state"] != "FATAL")
