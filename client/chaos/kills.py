"""Drills: SIGKILL of an actor N times, and of the learner N times, in a running `tandem up`."""

from __future__ import annotations

import os
import re
import signal
import time

from tandem.client.chaos.judge import Drill, spread
from tandem.client.chaos.run import Run, RunFailed, replaced, rows, updates

LEARNER = "learner-default"
BAD_COUNTERS = ("batches_malformed", "intake_errors")  # what a corrupt batch would raise in the learner
RESUMED = re.compile(r"resumed from checkpoint: version (-?\d+), (\d+) updates")


def bad_counts(data: dict) -> dict[str, int]:
    counters = rows(data)[LEARNER]["counters"]
    return {key: int(counters.get(key, 0)) for key in BAD_COUNTERS}


def actor_kills(run: Run, drill: Drill, count: int, actor: str = "actor-0") -> None:
    """kill -9 `actor` `count` times; each time until it is RUNNING again under a new pid."""
    drill.thresholds = {
        "restart_p95_s_max": 15.0,
        "restart_max_s_max": 30.0,
        "learner_restarts": 0,
        "corrupt_batches": 0,
        "backoff_max_s": run.config.supervisor.backoff_max_s,
    }
    start = run.wait(lambda d: updates(d) > 0, 60, "the learner training")
    learner_pid, first_updates, bad_before = rows(start)[LEARNER]["pid"], updates(start), bad_counts(start)
    latencies, stalls = [], 0
    last_updates, data = first_updates, start
    for i in range(count):
        pid = rows(data)[actor]["pid"]
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        data = run.wait(replaced(actor, pid), 60, f"{actor} back after kill {i + 1}")
        latencies.append(time.monotonic() - killed)
        stalls += updates(data) <= last_updates  # no update at all between two kills
        last_updates = updates(data)
    data = run.wait(lambda d: updates(d) > first_updates, 30, "the learner still updating")
    drill.figures = {
        "kills": count,
        "restart": spread(latencies),
        "updates_before": first_updates,
        "updates_after": updates(data),
        "kill_intervals_without_updates": stalls,
        "learner_restarts": int(rows(data)[LEARNER]["pid"] != learner_pid),
        "corrupt_batches": sum(bad_counts(data).values()) - sum(bad_before.values()),
        "actor_restarts": rows(data)[actor]["restarts"],
    }
    f = drill.figures
    drill.check("restart p95 <= 15 s", f["restart"]["p95_s"] <= 15.0)
    drill.check("restart max <= 30 s", f["restart"]["max_s"] <= 30.0)
    drill.check("learner updates rose across the drill", f["updates_after"] > f["updates_before"])
    drill.check("learner restarts == 0", f["learner_restarts"] == 0)
    drill.check("corrupt batches == 0", f["corrupt_batches"] == 0)


def restored_updates(run: Run, seen: int) -> int | None:
    """Updates of the checkpoint the learner resumed from the `seen`+1-th time, from its log (None before then)."""
    try:
        found = RESUMED.findall(run.path("logs", f"{LEARNER}.log").read_text(errors="replace"))
    except OSError:
        return None
    return int(found[seen][1]) if len(found) > seen else None


def learner_kills(run: Run, drill: Drill, count: int) -> None:
    """kill -9 the learner `count` times (each once it has checkpointed); actors must live on, their versions
    never go back, and the learning lost is what came after the last checkpoint."""
    interval = run.config.learner.checkpoint_interval_s
    drill.thresholds = {
        "actor_pid_changes": 0,
        "version_regressions": 0,
        "checkpoint_interval_s": interval,
        "lost_updates_max": "updates/s x (checkpoint_interval_s + 5 s) + 50",
    }
    data = run.wait(lambda d: all(r["state"] == "RUNNING" for r in d["processes"]), 60, "every process running")
    actors = {n: r["pid"] for n, r in rows(data).items() if r["role"] == "actor"}
    highest = {n: -1 for n in actors}
    regressions, lost, allowed, back_s = 0, [], [], []
    resumes = len(RESUMED.findall(run.path("logs", f"{LEARNER}.log").read_text(errors="replace")))

    def watch(d: dict) -> None:
        nonlocal regressions
        for name in actors:
            version = rows(d)[name]["version"]
            if version is not None and version >= 0:
                regressions += version < highest[name]
                highest[name] = max(highest[name], version)

    for i in range(count):
        # a checkpoint newer than the last restart, and training under way
        data = run.wait(
            lambda d: (
                (watch(d) or True)
                and rows(d)[LEARNER]["state"] == "RUNNING"
                and updates(d) > 0
                and rows(d)[LEARNER]["counters"].get("checkpoints", 0) > 0
            ),
            60 + interval,
            "a checkpoint",
        )
        rate = data["policies"][0]["updates_per_s"] or 0.0
        pid, before = rows(data)[LEARNER]["pid"], updates(data)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        data = run.wait(
            lambda d, pid=pid: (watch(d) or True) and replaced(LEARNER, pid)(d),
            60,
            f"the learner back after kill {i + 1}",
        )
        back_s.append(time.monotonic() - killed)
        deadline = time.monotonic() + 30
        while (restored := restored_updates(run, resumes)) is None:
            if time.monotonic() > deadline:
                raise RunFailed("the restarted learner never logged the checkpoint it resumed from")
            time.sleep(0.2)
        resumes += 1
        lost.append(before - restored)
        allowed.append(rate * (interval + 5.0) + 50)
    data = run.wait(
        lambda d: (watch(d) or True) and updates(d) > 0 and rows(d)[LEARNER]["state"] == "RUNNING",
        30,
        "the learner training again",
    )
    watch(data)
    changed = sum(rows(data)[n]["pid"] != pid for n, pid in actors.items())
    drill.figures = {
        "kills": count,
        "learner_back": spread(back_s),
        "lost_updates": lost,
        "lost_updates_allowed": [round(a) for a in allowed],
        "actor_pid_changes": changed,
        "version_regressions": regressions,
        "highest_versions_seen": highest,
    }
    drill.check("actors keep their pids", changed == 0)
    drill.check("weight versions seen by actors never go back", regressions == 0)
    drill.check(
        "learning lost >= 0 and within one checkpoint interval (+5 s)", all(0 <= x <= a for x, a in zip(lost, allowed))
    )
