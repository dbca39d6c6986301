"""`tandem bench learn`: training and evaluation return against env frames and wall time, per seed and as medians."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import click

from tandem.client.bench.options import json_option, seed_options
from tandem.client.bench.references import load_reference
from tandem.client.bench.runs import RunFigures, timed_run
from tandem.client.config_cmd import bench_set_option

POINTS = (0.25, 0.5, 0.75, 1.0)  # where on the frame axis each seed's returns are read, as shares of --frames


def frames_per_step(config_path: Path, overrides: tuple[str, ...]) -> int:
    """Env frames one agent step stands for: the Atari frame skip, else 1."""
    from tandem.daemons.config.loader import load_config

    config = load_config(config_path, overrides)
    return config.env.atari.frame_skip if config.env.atari.enabled else 1


def value_at(rows: list[dict], key: str, env_steps: float) -> float | None:
    """The newest value of `key` among the progress rows at or before `env_steps`."""
    found = None
    for row in rows:
        if row.get("env_steps", 0) > env_steps:
            break
        if row.get(key) is not None:
            found = row[key]
    return found


def point_frames(frames: int, reference: dict | None) -> list[int]:
    """Where returns are read: quarters of the run, and every frame count the reference gives a return at."""
    grid = {int(frames * share) for share in POINTS}
    if reference:
        grid |= {int(p["frames"]) for p in reference.get("points", []) if 0 < int(p.get("frames", 0)) <= frames}
    return sorted(grid)


def seed_record(seed: int, figures: RunFigures, frames: int, skip: int, at: list[int] | None = None) -> dict:
    """One seed's figures: the stop, the time and frames to solve (if its eval_return stop held), the curve."""
    summary = figures.summary
    rows = [*figures.rows, summary] if "env_steps" in summary else figures.rows  # the summary is the last row
    solved = "evaluation return" in str(summary.get("reason", ""))
    met = summary.get("condition_met_unix")
    points = []
    for at_frames in at or point_frames(frames, None):
        steps = at_frames / skip
        reached = rows and rows[-1].get("env_steps", 0) >= steps * 0.98
        points.append(
            {
                "frames": at_frames,
                "reached": bool(reached),
                "train_return": value_at(rows, "mean_return_100", steps),
                "eval_return": value_at(rows, "eval_return", steps),
            }
        )
    last = rows[-1] if rows else {}
    elapsed = last.get("elapsed_s") or 0.0
    return {
        "seed": seed,
        "solved": solved,
        "reason": summary.get("reason"),
        "solve_s": round(met - figures.started_unix, 2) if solved and met else None,
        # the env steps behind the version whose evaluation solved it (as a reference that pauses training to
        # evaluate counts them); the actors went on stepping while that round played: stop_frames
        "solve_frames": int(summary.get("eval_env_steps") or summary.get("env_steps", 0)) * skip if solved else None,
        "stop_frames": int(summary.get("env_steps", 0)) * skip if solved else None,
        "frames": int(summary.get("env_steps", 0)) * skip,
        "updates": summary.get("updates"),
        "frames_per_s": round(last.get("env_steps", 0) * skip / elapsed, 1) if elapsed else None,
        "points": points,
    }


def median_or_none(values: list) -> float | None:
    known = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(known) if known else None


def medians(runs: list[dict], limit_frames: int, limit_s: float) -> dict:
    """Medians over seeds; an unsolved seed counts as the limit, so a median never hides a failure."""
    out = {
        "solved": sum(r["solved"] for r in runs),
        "seeds": len(runs),
        "solve_frames": median_or_none([r["solve_frames"] if r["solved"] else limit_frames for r in runs]),
        "stop_frames": median_or_none([r["stop_frames"] if r["solved"] else limit_frames for r in runs]),
        "solve_s": median_or_none([r["solve_s"] if r["solved"] else limit_s for r in runs]),
        "frames_per_s": median_or_none([r["frames_per_s"] for r in runs]),
        "points": [],
    }
    for i, point in enumerate(runs[0]["points"] if runs else []):
        out["points"].append(
            {
                "frames": point["frames"],
                "train_return": median_or_none([r["points"][i]["train_return"] for r in runs]),
                "eval_return": median_or_none([r["points"][i]["eval_return"] for r in runs]),
            }
        )
    return out


def compare(mine: dict, reference: dict) -> dict:
    """Tandem's medians beside the reference's: ratios of frames and seconds (lower: better), returns side by side."""
    out: dict = {"name": reference.get("name")}
    for key in ("solve_frames", "solve_s"):
        theirs = reference.get(key)
        if mine.get(key) is not None and theirs:
            out[key] = {"tandem": mine[key], "reference": theirs, "ratio": round(mine[key] / theirs, 2)}
    rows = []
    for point in reference.get("points", []):
        ours = next((p for p in mine["points"] if p["frames"] == point["frames"]), None)
        rows.append(
            {
                "frames": point["frames"],
                "reference_train_return": point.get("train_return"),
                "tandem_train_return": ours["train_return"] if ours else None,
            }
        )
    if rows:
        out["points"] = rows
    return out


def fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def print_table(record: dict) -> None:
    for r in record["runs"]:
        solved = (
            f"solved in {fmt(r['solve_s'], 2)} s by a version trained on {r['solve_frames']} frames "
            f"({r['stop_frames']} at the stop)"
            if r["solved"]
            else "not solved"
        )
        click.echo(
            f"seed {r['seed']}: {solved}; {r['frames']} frames, {fmt(r['frames_per_s'], 0)} frames/s  ({r['reason']})"
        )
        click.echo(
            "    "
            + "  ".join(
                f"@{p['frames']}{'' if p['reached'] else '*'}: train {fmt(p['train_return'])} "
                f"eval {fmt(p['eval_return'])}"
                for p in r["points"]
            )
        )
    if any(not p["reached"] for r in record["runs"] for p in r["points"]):
        click.echo("    (* not reached: the run ended sooner, and its last figures are shown)")
    m = record["median"]
    click.echo(
        f"median over {m['seeds']} seeds ({m['solved']} solved): {fmt(m['solve_s'], 2)} s, "
        f"{fmt(m['solve_frames'])} frames to solve ({fmt(m['stop_frames'])} at the stop); "
        f"{fmt(m['frames_per_s'], 0)} frames/s"
    )
    click.echo(
        "    "
        + "  ".join(f"@{p['frames']}: train {fmt(p['train_return'])} eval {fmt(p['eval_return'])}" for p in m["points"])
    )
    if (ref := record.get("reference")) is not None:
        click.echo(f"reference: {ref['name']}")
        for key in ("solve_frames", "solve_s"):
            if key in ref:
                c = ref[key]
                click.echo(
                    f"    {key}: Tandem {fmt(c['tandem'])} / reference {fmt(c['reference'])} = {c['ratio']:.2f}x"
                )
        for p in ref.get("points", []):
            click.echo(
                f"    @{p['frames']}: train return Tandem {fmt(p['tandem_train_return'])}, "
                f"reference {fmt(p['reference_train_return'])}"
            )


@click.command("learn")
@click.option(
    "--config",
    "config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The run to measure (its stop.eval_return, if set, is what 'solved' means).",
)
@click.option(
    "--frames",
    type=click.IntRange(min=1),
    required=True,
    help="Env frames per seed (Atari: agent steps x frame skip); the run stops there.",
)
@seed_options(3)
@click.option(
    "--limit-s", type=click.FloatRange(min=1.0), default=600.0, show_default=True, help="Wall-time limit of each run."
)
@click.option(
    "--reference",
    "reference_file",
    default=None,
    metavar="FILE|NAME",
    help="Reference figures to show beside Tandem's: a JSON file, or the name of one shipped with Tandem "
    "(e.g. cartpole-cleanrl-ppo).",
)
@click.option(
    "--heartbeat-s",
    type=click.FloatRange(min=0.05, max=1.0),
    default=0.2,
    show_default=True,
    help="supervisor.heartbeat_interval_s of the runs: the supervisor's figures at the stop are at most "
    "this old (at 15k env steps/s, 1 s is 15k frames).",
)
@click.option(
    "--keep",
    "keep",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep each seed's run directory as KEEP/seed-N (curves for `tandem plot`, checkpoints); by default they "
    "are temporary. Each must not exist yet.",
)
@bench_set_option
@json_option
def learn_cmd(
    config: Path,
    frames: int,
    seeds: int,
    first_seed: int,
    limit_s: float,
    reference_file: str | None,
    heartbeat_s: float,
    keep: Path | None,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Training and evaluation return against env frames and wall time for each seed, with the medians."""
    from tandem.daemons.settings.fields import ConfigError

    try:
        skip = frames_per_step(config, overrides)
        reference = load_reference(reference_file) if reference_file else None
    except (ConfigError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    steps = math.ceil(frames / skip)
    numbers = range(first_seed, first_seed + seeds)
    kept = {seed: keep / f"seed-{seed}" if keep is not None else None for seed in numbers}
    for path in kept.values():
        if path is not None and path.exists():  # a run directory with checkpoints would be resumed, not measured
            raise click.UsageError(f"--keep: {path} exists; name a new folder")
    runs = []
    for seed in numbers:
        figures = timed_run(
            config,
            limit_s,
            [
                f"supervisor.heartbeat_interval_s={heartbeat_s}",
                *overrides,
                f"run.seed={seed}",
                f"stop.env_steps={steps}",
            ],
            keep_dir=kept[seed],
        )
        runs.append(seed_record(seed, figures, frames, skip, point_frames(frames, reference)))
        if not as_json:
            click.echo(f"seed {seed} done: {runs[-1]['reason']}", err=True)
    record = {
        "benchmark": "learn",
        "config": str(config),
        "frames": frames,
        "frames_per_step": skip,
        "heartbeat_s": heartbeat_s,
        "overrides": list(overrides),
        "runs": runs,
        "median": medians(runs, frames, limit_s),
    }
    if reference is not None:
        record["reference"] = compare(record["median"], reference)
    if as_json:
        click.echo(json.dumps(record))
    else:
        print_table(record)
