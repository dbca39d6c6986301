"""`tandem plot RUN_DIR`: a picture (PNG, SVG or PDF, drawn with matplotlib) of the curves in a run's metrics.jsonl."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from tandem.client.run_curves import Segment, load, series
from tandem.daemons.runtime.exit_codes import ExitCode

# (title, which flat keys belong to the chart)
CHARTS = [
    (
        "Return",
        lambda k: (
            k in ("mean_return_100", "eval_return")
            or k.startswith("agent_returns_100/")
            or (k.startswith("policies/") and k.endswith("/eval_return"))
        ),
    ),
    ("Env steps/s", lambda k: k == "env_steps_per_s"),
    ("Updates/s", lambda k: k == "updates_per_s"),
    ("Policy lag (versions)", lambda k: k == "lag_mean"),
    ("Batches dropped by actors", lambda k: k == "batches_dropped"),
    # The learners' diagnostics of their last update (train/NAME, or policies/P/train/NAME with several)
    ("Losses", lambda k: diagnostic(k) in ("policy_loss", "value_loss")),
    ("Entropy", lambda k: diagnostic(k) == "entropy"),
    ("KL and clip fraction", lambda k: diagnostic(k) in ("approx_kl", "clip_fraction")),
    ("Explained variance", lambda k: diagnostic(k) == "explained_variance"),
    # where the learner's loop spent its time (share of wall time): which of them bounds the run
    ("Learner time (share)", lambda k: (diagnostic(k) or "").startswith("time_")),
    # self-play learners only
    ("Self-play rating", lambda k: diagnostic(k) in ("rating", "rating_ordinal")),
    ("Self-play win rate against the pool", lambda k: diagnostic(k) == "pool_win_rate"),
]
CHART_SIZE_IN = (6.4, 2.9)  # width, height of one chart
# Training time reads in the largest unit that keeps a long run's ticks short: (up to seconds, unit, seconds per unit)
TIME_UNITS = ((120.0, "s", 1.0), (2 * 3600.0, "min", 60.0), (math.inf, "h", 3600.0))


@dataclass(frozen=True)
class XAxis:
    """A column of charts: the record key on x, its label, and what x is divided by to read in the label's unit."""

    key: str
    label: str
    scale: float = 1.0


def x_axes(segments: list[Segment]) -> list[XAxis]:
    """Env steps, and training time in seconds, minutes or hours, whichever the run's length reads best in."""
    ends = [end for s in segments if (end := s.end("elapsed_s")) is not None]
    seconds = max(ends, default=0.0)
    _, unit, scale = next(u for u in TIME_UNITS if seconds <= u[0])
    return [XAxis("env_steps", "env steps"), XAxis("elapsed_s", f"training time ({unit})", scale)]


def count_label(x: float, _pos: int | None = None) -> str:
    """1.5M, 20k, 500, 0.5: counts and times with k and M, never an SI milli on an axis of steps or seconds."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.4g}{suffix}"
    return f"{x:.4g}"


def panels(segments: list[Segment]) -> list[tuple[str, Callable[[str], bool]]]:
    """The charts this run has a point for: a run without self-play (or several policies) draws no empty ones."""
    return [
        (title, wanted)
        for title, wanted in CHARTS
        if any(series(s, wanted, key) for s in segments for key in ("env_steps", "elapsed_s"))
    ]


def diagnostic(key: str) -> str | None:
    """'entropy' for 'train/entropy' or 'policies/P/train/entropy'; None for anything else."""
    head, sep, name = key.rpartition("train/")
    return name if sep and (head == "" or (head.startswith("policies/") and head.count("/") == 2)) else None


def metrics_path(run: Path) -> Path:
    return run / "metrics.jsonl" if run.is_dir() else run


def summary(segments: list[Segment]) -> list[tuple[str, str]]:
    records = [r for s in segments for r in s.records]
    last = records[-1]
    evals = [r["eval_return"] for r in records if isinstance(r.get("eval_return"), (int, float))]
    training_s = sum(s.records[-1].get("elapsed_s", 0.0) for s in segments if s.records)
    rows = [
        ("env steps", last.get("env_steps")),
        ("training time (s)", round(training_s, 1)),
        ("starts", len(segments)),
        ("updates", last.get("updates")),
        ("episodes", last.get("episodes")),
        ("mean return (last 100)", last.get("mean_return_100")),
        ("last evaluation return", last.get("eval_return")),
        ("best evaluation return", max(evals) if evals else None),
    ]
    return [
        (name, "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value))
        for name, value in rows
    ]


def draw_chart(ax, title: str, wanted, axis: XAxis, segments: list[Segment]) -> None:
    """One chart: each series a line per segment (one colour, one legend entry), a dashed line at each resume."""
    from matplotlib.ticker import FuncFormatter

    by_segment = [series(segment, wanted, axis.key) for segment in segments]
    names = sorted({name for found in by_segment for name in found})
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}
    labelled: set[str] = set()
    for segment, found in zip(segments, by_segment):
        for name in names:
            points = found.get(name)
            if not points:
                continue
            xs, ys = zip(*points)
            (line,) = ax.plot(
                [x / axis.scale for x in xs],
                ys,
                color=colours[name],
                linewidth=1.2,
                marker="." if len(xs) == 1 else None,
                label=None if name in labelled else name,
            )
            line.set_gid(f"{axis.key}:{name}:{segment.number}")  # the line's id in an SVG
            labelled.add(name)
    for segment in segments[1:]:  # where the run was resumed
        if names and (x := segment.start(axis.key)) is not None:
            resumed = ax.axvline(x / axis.scale, color="0.55", linestyle="--", linewidth=0.8)
            resumed.set_gid(f"{axis.key}:resumed:{segment.number}")
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel(axis.label, fontsize=8)
    ax.xaxis.set_major_formatter(FuncFormatter(count_label))
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)
    if names:
        ax.legend(fontsize=7, loc="best")
    else:  # this chart has points against the other axis only (records without env_steps)
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")


def figure(segments: list[Segment], total: int, source: Path):
    """The matplotlib figure: each chart with data against env steps (left) and training time (right), under a
    summary. The caller closes it (matplotlib.pyplot.close)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, and no GUI toolkit is imported
    import matplotlib.pyplot as plt

    charts, axes = panels(segments), x_axes(segments)
    width, height = CHART_SIZE_IN
    fig, grid = plt.subplots(
        len(charts),
        len(axes),
        figsize=(width * len(axes), height * len(charts) + 1.2),
        squeeze=False,
        layout="constrained",
    )
    for row, (title, wanted) in zip(grid, charts):
        for ax, axis in zip(row, axes):
            draw_chart(ax, title, wanted, axis, segments)
    kept = sum(len(s.records) for s in segments)
    text = "   ".join(f"{name}: {value}" for name, value in summary(segments))
    fig.suptitle(
        f"{source}: {total} records{f', {kept} plotted' if kept < total else ''}\n{text}",
        fontsize=9,
        ha="left",
        x=0.01,
    )
    return fig


def render(segments: list[Segment], total: int, source: Path, out: Path) -> None:
    """The figure written to `out`, in the format its suffix names."""
    fig = figure(segments, total, source)  # first: it picks the backend (Agg) before pyplot is imported here
    import matplotlib.pyplot as plt

    try:
        fig.savefig(out)
    finally:
        plt.close(fig)


@click.command("plot")
@click.argument("run_dir", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the picture; .png, .svg or .pdf (default RUN_DIR/report.png).",
)
@click.pass_obj
def plot_cmd(obj, run_dir: Path, out: Path | None) -> None:
    """Draw a run's curves from RUN_DIR/metrics.jsonl into a PNG (or SVG, PDF)."""
    source = metrics_path(run_dir)
    if not source.is_file():
        obj.fail(f"{source} does not exist: runs write it from the supervisor, once a second", ExitCode.USAGE)
    out = out or source.parent / "report.png"
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        obj.fail(f"--out {out}: the picture is written as .png, .svg or .pdf", ExitCode.USAGE)
    segments, total = load(source)
    if not any(s.records for s in segments):
        obj.fail(f"{source} holds no records yet", ExitCode.FAILURE)
    segments = [s for s in segments if s.records]
    if not panels(segments):
        obj.fail(f"{source} holds no figure that tandem plot draws (returns, rates, lag, losses)", ExitCode.FAILURE)
    try:
        render(segments, total, source, out)
    except OSError as exc:
        obj.fail(f"cannot write {out}: {exc.strerror or exc}", ExitCode.FAILURE)
    starts = f", {len(segments)} starts" if len(segments) > 1 else ""
    click.echo(f"wrote {out} ({total} records{starts})")
