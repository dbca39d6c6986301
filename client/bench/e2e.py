"""`tandem bench e2e`: wall time from starting `tandem up` to a solved evaluation, over several seeds."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from tandem.client.bench.examples import example_config
from tandem.client.config_cmd import bench_set_option

DEFAULT_CONFIG = example_config("cartpole.toml")


def run_seed(config: Path, seed: int, limit_s: float, extra: tuple[str, ...]) -> dict:
    """One `tandem up` from process start to exit; solved when it stopped on its eval_return condition."""
    with tempfile.TemporaryDirectory(prefix="tandem-e2e-") as tmp:
        args = [
            sys.executable,
            "-m",
            "tandem",
            "up",
            str(config),
            "--json",
            "--quiet",
            "--set",
            f"run.seed={seed}",
            "--set",
            f"run.dir='{tmp}/run'",
            "--set",
            f"stop.seconds={limit_s}",
        ]
        for item in extra:
            args += ["--set", item]
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
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The run to time; it must set stop.eval_return.  [default: examples/cartpole.toml of a checkout]",
)
@click.option("--seeds", default=3, show_default=True, help="Seeds 0..N-1, one full run each.")
@click.option(
    "--limit-s", default=120.0, show_default=True, help="Give up on a seed after this long (counted as unsolved)."
)
@click.option("--target-s", default=10.0, show_default=True, help="Target for the median time to solve.")
@bench_set_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="One seed, at most 30 s (a smoke run, not a figure to quote).")
def e2e_cmd(
    config: Path, seeds: int, limit_s: float, target_s: float, overrides: tuple[str, ...], as_json: bool, quick: bool
) -> None:
    """Median time from `tandem up` to a greedy evaluation mean >= stop.eval_return (start-up included)."""
    if config is None:
        config = DEFAULT_CONFIG
    if quick:
        seeds, limit_s = 1, min(limit_s, 30.0)
    runs = []
    for seed in range(seeds):
        runs.append(run_seed(config, seed, limit_s, overrides))
        if not as_json:
            r = runs[-1]
            click.echo(
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
    if as_json:
        click.echo(json.dumps(record))
    else:
        click.echo(
            f"median {median:.2f} s over {seeds} seeds (target <= {target_s:g} s): "
            f"{'met' if record['met'] else 'NOT met'}"
        )
