"""`tandem bench selfplay`: an actor's env steps/s with opponents drawn from a pool of 50 versions, against one
fixed opponent, in the same session (Connect Four, the example's network)."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import click
import numpy as np

from tandem.client.bench.examples import example_config
from tandem.client.bench.options import json_option
from tandem.client.bench.report import finish, progress
from tandem.client.harness import up_command
from tandem.protocol import WeightBlob

TARGET_SHARE = 0.9  # steps/s against a pool of 50 within 10% of steps/s against a fixed opponent (issue 31)
SKIP_S = 8.0  # the first seconds of a run (start-up, first weights, first loads) are not measured
MODES = {
    # one pooled version, always drawn: the opponent never changes
    "fixed": ["learner.pool_size=1", "selfplay.opponents='latest'"],
    # 50 pooled versions, each episode's opponent drawn uniformly: 8 held at once, the others fetched as drawn
    "pool": ["learner.pool_size=50", "selfplay.opponents='uniform'"],
}
COMMON = [
    "eval.enabled=false",
    "actors.count=1",
    "actors.follow_pace=false",  # the actor steps as fast as it can: what it costs to play, not the learner's pace
    "learner.pool_every=1000000",  # the pool is the one written before the start; training adds none
    "selfplay.scripted_share=0.0",  # every game against the pool: what drawing from it costs, nothing else
    "supervisor.heartbeat_interval_s=0.5",
]


def write_pool(config_path: Path, run_dir: Path, versions: int, overrides: list[str]) -> None:
    """`versions` pooled versions of the example's network (each its own initial weights) in the learner's pool."""
    import dataclasses

    from tandem.daemons.algorithms import make_algorithm
    from tandem.daemons.config import load_config
    from tandem.daemons.envs.probe import probe_policy_spaces
    from tandem.daemons.learner.opponent_pool import OpponentPool
    from tandem.daemons.settings.plugins import add_to_path, plugin_folders

    add_to_path(plugin_folders(config_path))  # the example's network, beside it, as the daemons find it
    config = load_config(config_path, overrides)
    spaces = probe_policy_spaces(config, "default")
    pool = OpponentPool(run_dir / "learner-default" / "pool", 1, versions, {})
    for version in range(1, versions + 1):
        seeded = dataclasses.replace(config, run=dataclasses.replace(config.run, seed=version))  # its own weights
        weights = make_algorithm(seeded, spaces.observation_space, spaces.action_space, "cpu").weights()
        pool.offer(version, list(WeightBlob.build("default", version, 0, weights).to_frames()))


def run_mode(config_path: Path, mode: str, seconds: float, tmp: Path, round_no: int) -> dict:
    """One `tandem up` of the example in `mode`; the actor's median env steps/s after SKIP_S, and its loads."""
    run_dir = tmp / f"{mode}-{round_no}"
    overrides = [f"run.dir='{run_dir}'", *COMMON, *MODES[mode], f"stop.seconds={seconds}"]
    write_pool(config_path, run_dir, 1 if mode == "fixed" else 50, overrides)
    command = up_command(config_path, overrides, as_json=False)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    if done.returncode != 0:
        raise click.ClickException(f"the {mode} run failed ({done.returncode}): {done.stderr[-1500:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rates = [r["env_steps_per_s"] for r in rows if r.get("elapsed_s", 0) >= SKIP_S and r.get("env_steps_per_s")]
    if not rates:
        raise click.ClickException(f"the {mode} run recorded no env steps/s after {SKIP_S:g} s")
    return {
        "mode": mode,
        "round": round_no,
        "env_steps_per_s": round(statistics.median(rates), 1),
        "wall_s": round(time.monotonic() - started, 1),
    }


@click.command("selfplay")
@click.option("--seconds", default=40.0, show_default=True, type=click.FloatRange(min=15.0), help="Length of each run.")
@click.option(
    "--rounds", default=2, show_default=True, type=click.IntRange(min=1), help="Runs of each mode, alternated."
)
@json_option
def selfplay_cmd(seconds: float, rounds: int, as_json: bool) -> None:
    """An actor's env steps/s drawing opponents from 50 pooled versions vs one fixed opponent; target: within 10%.

    Connect Four (examples/connect_four_selfplay.toml), one actor that does not wait for its learner, the
    learner training beside it as in any run. The modes alternate, so a machine that slows down mid-run slows
    both; each run's figure is the median of its per-second rates after its first seconds."""
    config_path = example_config("connect_four_selfplay.toml")
    say, runs = progress(as_json), []
    with tempfile.TemporaryDirectory(prefix="tandem-bench-selfplay-") as tmp:
        for round_no in range(rounds):
            for mode in MODES:
                runs.append(run_mode(config_path, mode, seconds, Path(tmp), round_no))
                say(f"  {mode} round {round_no + 1}: {runs[-1]['env_steps_per_s']:,.0f} env steps/s")
    median = {m: float(np.median([r["env_steps_per_s"] for r in runs if r["mode"] == m])) for m in MODES}
    share = median["pool"] / median["fixed"]
    record = {
        "benchmark": "selfplay",
        "env": "pettingzoo.classic.connect_four_v3",
        "seconds": seconds,
        "rounds": rounds,
        "runs": runs,
        "median_env_steps_per_s": median,
        "pool_share": round(share, 3),
        "target_share": TARGET_SHARE,
        "met": share >= TARGET_SHARE,
    }
    summary = (
        f"env steps/s, median of {rounds}: fixed opponent {median['fixed']:,.0f}, pool of 50 {median['pool']:,.0f}: "
        f"{share:.2f} of it (target >= {TARGET_SHARE}: {'met' if record['met'] else 'NOT met'})"
    )
    finish(record, as_json, [summary])
