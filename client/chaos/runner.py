"""`tandem chaos`: the drills, grouped into a few real runs that share their start-up, and one JSON document."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from tandem.client.chaos import bad_batches, disk, endings, env_faults, kills, stops
from tandem.client.chaos.judge import Drill
from tandem.client.chaos.run import Run

# name -> (quick, full) count or seconds of what repeats
COUNTS = {"actor_kill": (2, 20), "learner_kill": (1, 5), "bad_batches": (5.0, 60.0), "leak": (3, 50)}


@dataclass
class Plan:
    """One `tandem up` run: its overrides, the drills it hosts in order, and how it ends (itself a drill)."""

    overrides: list[str]
    drills: list[str]
    ending: str | None  # 'SIGTERM', 'SIGINT', 'stop'; None: just closed


PLANS = {
    "core": Plan(
        [
            "actors.count=2",
            "supervisor.liveness_timeout_s=4.0",
            "supervisor.crash_loop_max=1000",
            "learner.checkpoint_interval_s=3.0",
        ],
        ["actor_kill", "bad_batches", "sigstop_actor", "sigstop_learner", "learner_kill"],
        "SIGTERM",
    ),
    "envs": Plan(
        ["supervisor.liveness_timeout_s=6.0"], ["hang_build_once", "hang_build_always", "hang_step"], "SIGINT"
    ),
    "leak": Plan(
        [
            "actors.count=1",
            "env.num_envs=2",
            "env.id='tandem.client.chaos.envs:troubled'",
            "env.kwargs.leak=0",
            "supervisor.actor_rss_limit_mb=400",
            "supervisor.crash_loop_max=1",
            "learner.checkpoint_interval_s=5.0",
        ],
        ["leak"],
        "stop",
    ),
    "disk": Plan(["actors.count=1", "learner.checkpoint_interval_s=2.0"], ["full_disk"], None),
}
ENV_DRILLS = ("hang_build_once", "hang_build_always", "hang_step")
ENDINGS = {"SIGTERM": "sigterm", "SIGINT": "sigint", "stop": "stop"}
DRILLS = [d for p in PLANS.values() for d in [*p.drills, *([ENDINGS[p.ending]] if p.ending else [])]]


def count(name: str, quick: bool):
    return COUNTS[name][0 if quick else 1]


def run_plan(key: str, plan: Plan, wanted: set[str], quick: bool, tmp: Path, out: dict[str, Drill]) -> None:
    """Start the plan's run, run the wanted drills in order, end it; every drill's record lands in `out`."""
    names = [d for d in plan.drills if d in wanted]
    ending = ENDINGS.get(plan.ending or "")
    drills = {n: Drill(n) for n in [*names, *([ending] if ending in wanted else [])]}
    out.update(drills)
    overrides, wrap = list(plan.overrides), ()
    markers = tmp / "markers"
    markers.mkdir()
    if key == "envs":
        overrides += env_faults.overrides(markers, build_deadline_s=3.0)
    elif key == "leak":
        overrides.append(f"env.kwargs.marker_dir='{markers}'")
    elif key == "disk":
        wrap = disk.mount_wrap(tmp / "run")
        if isinstance(wrap, str):
            drills["full_disk"].skipped = wrap
            return
    try:
        run = Run(tmp, overrides, wrap=wrap)
    except Exception as exc:  # noqa: BLE001 - the run could not start: each of its drills says so
        for d in drills.values():
            d.crashed(exc)
        return
    steps: dict[str, Callable[[], None]] = {
        "actor_kill": lambda: kills.actor_kills(run, drills["actor_kill"], count("actor_kill", quick)),
        "learner_kill": lambda: kills.learner_kills(run, drills["learner_kill"], count("learner_kill", quick)),
        "bad_batches": lambda: bad_batches.bad_batches(run, drills["bad_batches"], count("bad_batches", quick)),
        "sigstop_actor": lambda: stops.stop_actor(run, drills["sigstop_actor"]),
        "sigstop_learner": lambda: stops.stop_learner(run, drills["sigstop_learner"]),
        "leak": lambda: env_faults.leak(run, drills["leak"], count("leak", quick)),
        "full_disk": lambda: disk.full_disk(run, drills["full_disk"]),
    }
    try:
        if set(names) & set(ENV_DRILLS):
            try:  # the three env faults happen at once in one run; judged together
                env_faults.env_faults(run, markers, *(drills.get(n, Drill(n)) for n in ENV_DRILLS))
            except Exception as exc:  # noqa: BLE001
                for n in ENV_DRILLS:
                    if n in drills:
                        drills[n].crashed(exc)
        for name in names:
            if name not in steps:
                continue
            if run.proc.poll() is not None:
                drills[name].error = f"the run had ended ({run.proc.returncode}) before this drill"
                continue
            try:
                steps[name]()
            except Exception as exc:  # noqa: BLE001 - a drill that cannot finish fails; the others still run
                drills[name].crashed(exc)
        if ending in drills:
            try:
                endings.ending(run, drills[ending], plan.ending)
            except Exception as exc:  # noqa: BLE001
                drills[ending].crashed(exc)
    finally:
        run.close()


def run_all(wanted: set[str], quick: bool, log: Callable[[str], None]) -> dict:
    started = time.monotonic()
    drills: dict[str, Drill] = {}
    for key, plan in PLANS.items():
        in_plan = {*plan.drills, ENDINGS.get(plan.ending or "")}
        if not wanted & in_plan:
            continue
        log(f"chaos: run '{key}' ({', '.join(d for d in DRILLS if d in wanted and d in in_plan)})")
        at = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"tandem-chaos-{key}-") as tmp:
            run_plan(key, plan, wanted, quick, Path(tmp), drills)
        log(f"chaos: run '{key}' took {time.monotonic() - at:.0f} s")
    ordered = {n: drills[n].record() for n in DRILLS if n in drills}
    return {
        "command": "tandem chaos" + (" --quick" if quick else ""),
        "quick": quick,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpu_count": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)},
        "seconds": round(time.monotonic() - started, 1),
        "ok": all(r["ok"] is not False for r in ordered.values()),
        "failed": [n for n, r in ordered.items() if r["ok"] is False],
        "skipped": [n for n, r in ordered.items() if r["ok"] is None],
        "drills": ordered,
    }


@click.command("chaos")
@click.option(
    "--quick",
    is_flag=True,
    help="Small counts and short durations (2 actor kills, 1 learner kill, 5 s of bad batches, 3 leak restarts).",
)
@click.option("--only", default=None, metavar="NAME[,NAME]", help=f"Run only these drills: {', '.join(DRILLS)}.")
@click.option(
    "--out", "out_file", default=None, type=click.Path(dir_okay=False), help="Also write the JSON document here."
)
def chaos_cmd(quick: bool, only: str | None, out_file: str | None) -> None:
    """Fault drills on real `tandem up` runs (kills, SIGSTOP, hangs, leaks, bad batches, full disk, stops).

    One JSON document; exit 1 if a drill fails."""
    wanted = set(DRILLS) if not only else {n.strip() for n in only.split(",") if n.strip()}
    unknown = wanted - set(DRILLS)
    if unknown:
        raise click.BadParameter(f"unknown drill(s) {sorted(unknown)}; known: {', '.join(DRILLS)}", param_hint="--only")
    record = run_all(wanted, quick, lambda line: click.echo(line, err=True))
    text = json.dumps(record, indent=2)
    if out_file:
        Path(out_file).write_text(text + "\n")
    click.echo(text)
    sys.exit(0 if record["ok"] else 1)
