"""`tandem bench e2e`: wall time from starting `tandem up` to a solved evaluation, over several seeds."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import click

from tandem.client.bench.options import example_config_option, json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.config_cmd import bench_set_option


def up_args(config: Path, run_dir: str, seed: int, limit_s: float, settings: Iterable[str]) -> list[str]:
    """The command line of one timed `tandem up --json` in `run_dir`: its seed, its time limit, then `settings`."""
    args = [sys.executable, "-m", "tandem", "up", str(config), "--json", "--quiet"]
    for item in (f"run.seed={seed}", f"run.dir='{run_dir}'", f"stop.seconds={limit_s}", *settings):
        args += ["--set", item]
    return args


def run_seed(config: Path, seed: int, limit_s: float, extra: tuple[str, ...]) -> dict:
    """One `tandem up` from process start to exit; solved when it stopped on its eval_return condition."""
    with tempfile.TemporaryDirectory(prefix="tandem-e2e-") as tmp:
        args = up_args(config, f"{tmp}/run", seed, limit_s, extra)
        started, started_unix = time.monotonic(), time.time()
        proc = subprocess.run(args, capture_output=True, text=True, timeout=limit_s + 60)
        wall = time.monotonic() - started
    return solve_record(seed, proc.returncode, proc.stdout, proc.stderr, started_unix, wall)


def solve_record(seed: int, returncode: int | None, stdout: str, stderr: str, started_unix: float, wall: float) -> dict:
    """A finished `tandem up --json` run's record; solved when it stopped on its eval_return condition."""
    try:
        summary = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        summary = {"reason": stderr.strip()[-300:]}
    solved = returncode == 0 and "evaluation return" in summary.get("reason", "")
    # Time to solve: from launching `tandem up` to the moment its stop condition held (the daemons'
    # shutdown after that is not part of solving); the wall time to exit is reported beside it.
    met = summary.get("condition_met_unix")
    solve_s = round(met - started_unix, 2) if solved and met else round(wall, 2)
    return {
        "seed": seed,
        "solve_s": solve_s,
        "wall_s": round(wall, 2),
        "solved": solved,
        "reason": summary.get("reason"),
        "updates": summary.get("updates"),
        "env_steps": summary.get("env_steps"),
    }


def median_solve_s(runs: list[dict], limit_s: float) -> float:
    """An unsolved run counts as the time limit, so the median never hides a failure."""
    return statistics.median(r["solve_s"] if r["solved"] else limit_s for r in runs)


@click.command("e2e")
@example_config_option("cartpole.toml", "The run to time; it must set stop.eval_return.")
@click.option("--seeds", default=3, show_default=True, help="Seeds 0..N-1, one full run each.")
@click.option(
    "--limit-s", default=120.0, show_default=True, help="Give up on a seed after this long (counted as unsolved)."
)
@click.option("--target-s", default=10.0, show_default=True, help="Target for the median time to solve.")
@bench_set_option
@json_option
@quick_option("One seed, at most 30 s")
def e2e_cmd(
    config: Path, seeds: int, limit_s: float, target_s: float, overrides: tuple[str, ...], as_json: bool, quick: bool
) -> None:
    """Median time from `tandem up` to a greedy evaluation mean >= stop.eval_return (start-up included)."""
    if quick:
        seeds, limit_s = 1, min(limit_s, 30.0)
    say, runs = progress(as_json), []
    for seed in range(seeds):
        runs.append(r := run_seed(config, seed, limit_s, overrides))
        say(
            f"seed {seed}: {r['solve_s']:7.2f} s (exit {r['wall_s']:.2f} s)  "
            f"{'solved' if r['solved'] else 'NOT solved'}  "
            f"updates {r['updates']}  env steps {r['env_steps']}  ({r['reason']})"
        )
    median = median_solve_s(runs, limit_s)
    record = {
        "benchmark": "e2e",
        "quick": quick,
        "config": str(config),
        "runs": runs,
        "median_s": median,
        "target_s": target_s,
        "met": median <= target_s and all(r["solved"] for r in runs),
        "solved": sum(r["solved"] for r in runs),
    }
    verdict = "met" if record["met"] else "NOT met"
    finish(record, as_json, [f"median {median:.2f} s over {seeds} seeds (target <= {target_s:g} s): {verdict}"])
