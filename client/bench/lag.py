"""`tandem bench lag`: an on-policy learner's policy lag and dropped unrolls with 1, 2 and 4 actors."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import click

from client.bench.runs import timed_run

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "cartpole_appo.toml"


def run_actors(config: Path, actors: int, seconds: float, overrides: tuple[str, ...]) -> dict:
    """One `tandem up` of `seconds` with `actors` actors and no evaluator; the learner's lag figures."""
    figures = timed_run(config, seconds, [f"actors.count={actors}", "eval.enabled=false", *overrides])
    rows = figures.learner_rows
    if not rows:
        raise click.ClickException(f"the run with {actors} actors wrote no learner metrics")
    last = rows[-1]
    received = max(last["batches_received"], 1)
    training = [r for r in rows if r["updates"] > 0]
    return {
        "actors": actors,
        "updates": last["updates"],
        "updates_per_s": round(last["updates"] / seconds, 1),
        "unrolls_received": last["batches_received"],
        # lag_mean: versions between acting and arriving; sample_lag_mean: between acting and training on it
        "arrival_lag_mean": round(statistics.fmean(r["lag_mean"] for r in training), 2) if training else None,
        "train_lag_mean": round(statistics.fmean(r["sample_lag_mean"] for r in training), 2) if training else None,
        "dropped_for_lag_share": round(last["batches_stale"] / received, 4),
        "dropped_queue_full_share": round(last.get("unrolls_dropped_full", 0) / received, 4),
    }


@click.command("lag")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="An on-policy run.  [default: examples/cartpole_appo.toml of a checkout]")
@click.option("--actors", "counts", default="1,2,4", show_default=True, help="Actor counts to run, comma-separated.")
@click.option("--seconds", default=20.0, show_default=True, help="Length of each run.")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Config overrides for every run.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="1 and 2 actors, 8 s each (a smoke run, not a figure to quote).")
def lag_cmd(config: Path | None, counts: str, seconds: float, overrides: tuple[str, ...], as_json: bool,
            quick: bool) -> None:
    """Mean policy lag and the share of unrolls dropped (for lag, or a full queue) with 1, 2, 4 actors."""
    if config is None:
        if not DEFAULT_CONFIG.is_file():
            raise click.UsageError("no examples/ beside this installation: pass --config PATH (an on-policy run "
                                   "config, such as examples/cartpole_appo.toml of the repository)")
        config = DEFAULT_CONFIG
    try:
        actor_counts = [int(c) for c in counts.split(",") if c.strip()]
    except ValueError:
        raise click.BadParameter(f"{counts!r} is not a comma-separated list of integers", param_hint="--actors") from None
    if quick:
        actor_counts, seconds = actor_counts[:2], min(seconds, 8.0)
    results = []
    for count in actor_counts:
        results.append(run_actors(config, count, seconds, overrides))
        if not as_json:
            r = results[-1]
            click.echo(f"{count} actor(s): lag on arrival {r['arrival_lag_mean']}, when trained {r['train_lag_mean']} "
                       f"versions; dropped for lag {100 * r['dropped_for_lag_share']:.1f}%, queue full "
                       f"{100 * r['dropped_queue_full_share']:.1f}% of {r['unrolls_received']} unrolls; "
                       f"{r['updates_per_s']} updates/s")
    if as_json:
        click.echo(json.dumps({"benchmark": "lag", "quick": quick, "config": str(config), "seconds": seconds,
                               "runs": results}))
