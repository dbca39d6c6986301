"""`tandem bench atari`: frames/s, learner samples/s, lag, drops and CPU/GPU use of an Atari run with 1..N actors."""

from __future__ import annotations

import statistics
from pathlib import Path

import click

from tandem.client.bench.options import counts_option, example_config_option, json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.bench.runs import RunFigures, timed_run
from tandem.client.config_cmd import bench_set_option
from tandem.daemons.config import ConfigError, load_config


def mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 1) if values else None


def throughput(figures: RunFigures, actors: int, frame_skip: int, batch_size: int) -> dict:
    """One run's figures: the supervisor's recent rates at the end of the run, and counts over all of it."""
    s, rows = figures.summary, figures.learner_rows
    last = rows[-1] if rows else {}
    steps_per_s, updates_per_s = s.get("env_steps_per_s") or 0.0, s.get("updates_per_s") or 0.0
    received = max(last.get("batches_received", 0), 1)
    learner_dropped = sum(
        last.get(k, 0) for k in ("batches_over_ratio", "batches_stale", "batches_malformed", "unrolls_dropped_full")
    )
    return {
        "actors": actors,
        "env_steps": s.get("env_steps", 0),
        "env_steps_per_s": round(steps_per_s, 1),
        "frames_per_s": round(steps_per_s * frame_skip, 1),
        "updates_per_s": round(updates_per_s, 2),
        "learner_samples_per_s": round(updates_per_s * batch_size, 1),
        "updates": last.get("updates", 0),
        "lag_mean": s.get("lag_mean"),
        "batches_dropped_by_actors": s.get("batches_dropped"),
        "learner_dropped_share": round(learner_dropped / received, 4),
        "cpu_percent_mean": mean(figures.cpu_percent),
        "gpu_percent_mean": mean(figures.gpu_percent),
    }


@click.command("atari")
@example_config_option("pong_appo.toml", "An Atari run.")
@counts_option("--actors", "actor_counts", "1,2", "Actor counts to run, comma-separated.")
@click.option("--seconds", default=60.0, show_default=True, help="Length of each throughput run (no evaluator).")
@click.option(
    "--learn-seconds",
    default=0.0,
    show_default=True,
    help="Then one learning run this long with the evaluator, reporting its return over time (0: none).",
)
@bench_set_option
@json_option
@quick_option("One actor for 15 s, no learning run")
def atari_cmd(
    config: Path,
    actor_counts: list[int],
    seconds: float,
    learn_seconds: float,
    overrides: tuple[str, ...],
    as_json: bool,
    quick: bool,
) -> None:
    """Env frames/s, learner samples/s and updates/s, lag, drops, CPU/GPU use with 1..N actors; a learning curve."""
    try:
        resolved = load_config(config, overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if quick:
        actor_counts, seconds, learn_seconds = actor_counts[:1], min(seconds, 15.0), 0.0
    frame_skip = resolved.env.atari.frame_skip if resolved.env.atari.enabled else 1
    say, runs = progress(as_json), []
    for count in actor_counts:
        figures = timed_run(
            config, seconds, [*overrides, f"actors.count={count}", "eval.enabled=false", "stop.eval_return=1e9"]
        )
        runs.append(r := throughput(figures, count, frame_skip, resolved.algorithm.batch_size))
        say(
            f"{count} actor(s): {r['frames_per_s']:.0f} frames/s ({r['env_steps_per_s']:.0f} steps/s), "
            f"learner {r['learner_samples_per_s']:.0f} samples/s ({r['updates_per_s']} updates/s), "
            f"lag {r['lag_mean']}, dropped by actors {r['batches_dropped_by_actors']}, by the learner "
            f"{100 * r['learner_dropped_share']:.1f}%, CPU {r['cpu_percent_mean']}%, GPU {r['gpu_percent_mean']}%"
        )
    curve = timed_run(config, learn_seconds, list(overrides)).eval_curve if learn_seconds > 0 else []
    for elapsed, steps, ret in curve:
        say(f"  {elapsed:7.1f} s  {steps * frame_skip:>11} frames  evaluation return {ret:.1f}")
    record = {
        "benchmark": "atari",
        "quick": quick,
        "config": str(config),
        "seconds": seconds,
        "runs": runs,
        "learning_curve": curve,
    }
    finish(record, as_json, [])
