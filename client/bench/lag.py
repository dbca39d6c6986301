"""`tandem bench lag`: policy lag and the data a learner throws away with 1, 2, 4 actors, with pacing on and off."""

from __future__ import annotations

import statistics
from pathlib import Path

import click

from tandem.client.bench.options import counts_option, example_config_option, json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.bench.runs import learner_rows, timed_run
from tandem.client.config_cmd import bench_set_option


def run_actors(config: Path, actors: int, seconds: float, overrides: tuple[str, ...], pace: str = "on") -> dict:
    """One `tandem up` with `actors` actors and no evaluator, `seconds` long from the learner's first metrics row
    (so a start slowed by a loaded machine, both daemons importing torch, eats into no measurement); the
    learner's lag and drop figures."""
    follow = "true" if pace == "on" else "false"
    figures = timed_run(
        config,
        seconds,
        [f"actors.count={actors}", "eval.enabled=false", f"actors.follow_pace={follow}", *overrides],
        ready=lambda run_dir: bool(learner_rows(run_dir)),
    )
    rows = figures.learner_rows
    if not rows:
        raise click.ClickException(f"the run with {actors} actors wrote no learner metrics")
    last = rows[-1]
    received = max(last["batches_received"], 1)
    training = [r for r in rows if r["updates"] > 0]
    # Thrown away by the learner: read and dropped over its samples-per-insert ratio (off-policy) or pushed
    # out of a full unroll queue (on-policy), as a share of every batch it read.
    thrown = last.get("batches_over_ratio", 0) + last.get("unrolls_dropped_full", 0)
    read = max(last["batches_received"] + last.get("batches_over_ratio", 0), 1)
    # The same from the first update on: start-up (the learner's warm-up, no budget yet) left out.
    first = training[0] if training else last
    thrown_training = thrown - first.get("batches_over_ratio", 0) - first.get("unrolls_dropped_full", 0)
    read_training = read - first["batches_received"] - first.get("batches_over_ratio", 0)
    advertised = [r.get("pace_per_s", 0.0) for r in training]
    return {
        "actors": actors,
        "pace": pace,
        "updates": last["updates"],
        "updates_per_s": round(last["updates"] / seconds, 1),
        "env_steps_per_s": round(figures.summary.get("env_steps", 0) / seconds, 1),
        "thrown_away_share": round(thrown / read, 4),
        "thrown_away_share_training": round(thrown_training / max(read_training, 1), 4),
        "training_updates_per_s": round(
            (last["updates"] - first["updates"]) / max(len(rows) - rows.index(first), 1), 1
        ),
        "paced_share": round(figures.summary.get("paced_s", 0.0) / (actors * seconds), 4),
        "pace_per_s_mean": round(statistics.fmean(advertised), 1) if advertised else 0.0,
        "unrolls_received": last["batches_received"],
        # lag_mean: versions between acting and arriving; sample_lag_mean: between acting and training on it
        "arrival_lag_mean": round(statistics.fmean(r["lag_mean"] for r in training), 2) if training else None,
        "train_lag_mean": round(statistics.fmean(r["sample_lag_mean"] for r in training), 2) if training else None,
        "dropped_for_lag_share": round(last["batches_stale"] / received, 4),
        "dropped_queue_full_share": round(last.get("unrolls_dropped_full", 0) / received, 4),
    }


@click.command("lag")
@example_config_option("cartpole_appo.toml", "An on-policy run.")
@counts_option("--actors", "actor_counts", "1,2,4", "Actor counts to run, comma-separated.")
@click.option("--seconds", default=20.0, show_default=True, help="Length of each run.")
@click.option(
    "--pace",
    type=click.Choice(["on", "off", "both"]),
    default="both",
    show_default=True,
    help="Actors follow the learner's insert budget (actors.follow_pace), or not, or one run of each.",
)
@click.option("--repeat", default=1, show_default=True, help="Runs per cell; figures are their medians.")
@bench_set_option
@json_option
@quick_option("1 actor, 8 s, pacing on and off")
def lag_cmd(
    config: Path,
    actor_counts: list[int],
    seconds: float,
    pace: str,
    repeat: int,
    overrides: tuple[str, ...],
    as_json: bool,
    quick: bool,
) -> None:
    """Mean policy lag and the share of batches the learner threw away, with 1, 2, 4 actors, pacing on and off.

    Works with on-policy runs (unrolls dropped from a full queue) and off-policy ones (`--config
    examples/cartpole.toml`: batches dropped over the samples-per-insert ratio).
    """
    if quick:
        actor_counts, seconds, repeat = actor_counts[:1], min(seconds, 8.0), 1
    paces = ["on", "off"] if pace == "both" else [pace]
    say, results = progress(as_json), []
    for count in actor_counts:
        for mode in paces:
            r = median_run([run_actors(config, count, seconds, overrides, mode) for _ in range(max(1, repeat))])
            results.append(r)
            say(
                f"{count} actor(s), pacing {mode}: lag on arrival {r['arrival_lag_mean']}, when trained "
                f"{r['train_lag_mean']} versions; learner threw away {100 * r['thrown_away_share']:.1f}% "
                f"({100 * r['thrown_away_share_training']:.1f}% once training) "
                f"(queue full {100 * r['dropped_queue_full_share']:.1f}%, for lag "
                f"{100 * r['dropped_for_lag_share']:.1f}%); actors waited {100 * r['paced_share']:.0f}% "
                f"of the time; {r['updates_per_s']} updates/s, {r['env_steps_per_s']:.0f} env steps/s"
            )
    record = {
        "benchmark": "lag",
        "quick": quick,
        "config": str(config),
        "seconds": seconds,
        "repeat": repeat,
        "runs": results,
    }
    finish(record, as_json, [])


def median_run(runs: list[dict]) -> dict:
    """One record per cell: the median of each figure over its runs (None where a run had none)."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        values = [r[key] for r in runs if isinstance(r[key], (int, float)) and not isinstance(r[key], bool)]
        if isinstance(value, (int, float)) and key != "actors" and len(values) == len(runs):
            out[key] = statistics.median(values)
    out["runs"] = len(runs)
    return out
