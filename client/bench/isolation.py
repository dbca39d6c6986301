"""`tandem bench isolation`: one actor's env steps/s beside an idle learner and beside one training flat out."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.daemons.config import apply_overrides, config_from_dict, render_toml
from tandem.daemons.supervisor.collector import HeartbeatCollector
from tandem.daemons.supervisor.ports import fix_ports

# The measured run, pinned here rather than read from examples/ (which an installed package does not have):
# CartPole-v1 with 8 envs per actor (the defaults) and the example's training settings.
BASE = [
    "run.name='bench'",
    "algorithm.batch_size=256",
    "algorithm.target_update_interval=100",
    "actors.count=1",
    "eval.enabled=false",
    "supervisor.heartbeat_interval_s=0.25",
    "stop.seconds=3600.0",
]
# (a) the learner only receives: training needs a full 2M ring (about 2M x 2 obs x 16 B, well within memory).
IDLE = ["learner.replay_capacity=2000000", "learner.replay_min_size=2000000"]
# (b) the learner trains as fast as it can: 64 samples per insert keeps it always behind, so CPU-bound.
TRAINING = ["learner.samples_per_insert=64.0"]


def wait_until(
    beats: HeartbeatCollector, procs: dict[str, subprocess.Popen], predicate, timeout_s: float, what: str
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        beats.pump()
        if predicate():
            return
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise click.ClickException(f"{name} exited with {proc.returncode} while waiting for {what}")
    raise click.ClickException(f"timed out after {timeout_s:g} s waiting for {what}")


def stop(procs: dict[str, subprocess.Popen], timeout_s: float = 10.0) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def run_phase(training: bool, seconds: float, actors: int = 1) -> dict:
    """Start a learner and `actors` actors, wait until all work, then measure over `seconds`.

    `steps_per_s` is the actors' total."""
    with tempfile.TemporaryDirectory(prefix="tandem-isolation-") as tmp:
        overrides = [f"run.dir='{tmp}/run'", *BASE, *(TRAINING if training else IDLE), f"actors.count={actors}"]
        path = Path(tmp) / "config.toml"
        path.write_text(render_toml(fix_ports(config_from_dict(apply_overrides({}, overrides)))))
        beats, procs = HeartbeatCollector(), {}
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            daemons = [("learner", ("learner", str(path)))]
            daemons += [(f"actor-{i}", ("actor", str(path), "--index", str(i))) for i in range(actors)]
            for name, args in daemons:
                with (Path(tmp) / f"{name}.log").open("ab") as log:
                    procs[name] = subprocess.Popen(
                        [sys.executable, "-m", "tandem", *args, "--control", beats.endpoint],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        cwd=tmp,
                        env=env,
                    )

            def running(n):
                return (b := beats.last(n)) is not None and b.stage == "running"

            names = ["learner-default", *(f"actor-{i}" for i in range(actors))]
            wait_until(beats, procs, lambda: all(running(n) for n in names), 120, "every daemon running")
            if training:
                wait_until(
                    beats, procs, lambda: beats.counter("learner-default", "updates") > 0, 120, "learner updates"
                )
            start = time.monotonic()
            wait_until(beats, procs, lambda: time.monotonic() - start >= seconds, seconds + 5, "the window")
            return {
                "steps_per_s": sum(beats.rate(f"actor-{i}", "env_steps", start) for i in range(actors)),
                "updates_per_s": beats.rate("learner-default", "updates", start),
                "updates": beats.counter("learner-default", "updates"),
            }
        finally:
            stop(procs)
            beats.close()


@click.command("isolation")
@click.option("--seconds", default=10.0, show_default=True, help="Measuring window of each phase (--quick: 3).")
@click.option(
    "--repeats", default=3, show_default=True, help="Fresh processes per phase; medians are reported (--quick: 1)."
)
@json_option
@quick_option("One 3 s window per phase")
def isolation_cmd(seconds: float, repeats: int, as_json: bool, quick: bool) -> None:
    """One actor's env steps/s with its learner training flat out, as a fraction of that with the learner idle."""
    if quick:
        seconds, repeats = 3.0, 1
    say, idle, busy = progress(as_json), [], []
    for r in range(repeats):
        idle.append(run_phase(False, seconds))
        busy.append(run_phase(True, seconds))
        if idle[-1]["updates"] > 0:
            raise click.ClickException("the idle learner trained: its replay filled within the window")
        say(
            f"repeat {r}: idle {idle[-1]['steps_per_s']:9.0f} steps/s   training {busy[-1]['steps_per_s']:9.0f} "
            f"steps/s   learner {busy[-1]['updates_per_s']:7.1f} updates/s"
        )
    idle_rate = statistics.median(p["steps_per_s"] for p in idle)
    busy_rate = statistics.median(p["steps_per_s"] for p in busy)
    ratio = busy_rate / idle_rate if idle_rate > 0 else 0.0
    record = {
        "benchmark": "isolation",
        "quick": quick,
        "machine": {"cpu_count": os.cpu_count()},
        "idle_steps_per_s": round(idle_rate, 1),
        "training_steps_per_s": round(busy_rate, 1),
        "learner_updates_per_s": round(statistics.median(p["updates_per_s"] for p in busy), 1),
        "ratio": round(ratio, 3),
        "target": {"ratio_min": 0.9},
        "met": ratio >= 0.9,
    }
    summary = (
        f"actor steps/s: idle learner {idle_rate:.0f}, training learner {busy_rate:.0f} "
        f"({record['learner_updates_per_s']:g} updates/s) on {os.cpu_count()} CPUs; "
        f"ratio {ratio:.3f} (target >= 0.9): {'met' if record['met'] else 'NOT met'}"
    )
    finish(record, as_json, [summary])
