"""`tandem plot RUN_DIR`: a self-contained HTML report (inline SVG charts) of a run's metrics.jsonl."""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path

import click

from client.svg_chart import line_chart
from daemons.runtime.exit_codes import ExitCode

MAX_POINTS = 2000  # per series: a week-long run is thinned to this, so the report stays small
# (title, which flat keys belong to the chart)
CHARTS = [
    ("Return", lambda k: k in ("mean_return_100", "eval_return") or k.startswith("agent_returns_100/")
     or (k.startswith("policies/") and k.endswith("/eval_return"))),
    ("Env steps/s", lambda k: k == "env_steps_per_s"),
    ("Updates/s", lambda k: k == "updates_per_s"),
    ("Policy lag (versions)", lambda k: k == "lag_mean"),
    ("Batches dropped by actors", lambda k: k == "batches_dropped"),
    # The learners' diagnostics of their last update (train/NAME, or policies/P/train/NAME with several)
    ("Losses", lambda k: diagnostic(k) in ("policy_loss", "value_loss")),
    ("Entropy", lambda k: diagnostic(k) == "entropy"),
    ("KL and clip fraction", lambda k: diagnostic(k) in ("approx_kl", "clip_fraction")),
    ("Explained variance", lambda k: diagnostic(k) == "explained_variance"),
]
AXES = [("env_steps", "env steps"), ("elapsed_s", "wall time (s)")]


def diagnostic(key: str) -> str | None:
    """'entropy' for 'train/entropy' or 'policies/P/train/entropy'; None for anything else."""
    head, sep, name = key.rpartition("train/")
    return name if sep and (head == "" or (head.startswith("policies/") and head.count("/") == 2)) else None


def metrics_path(run: Path) -> Path:
    return run / "metrics.jsonl" if run.is_dir() else run


def load(path: Path, max_points: int = MAX_POINTS) -> tuple[list[dict], int]:
    """Every k-th record (k chosen so at most max_points are kept; the last one always) and the record count.

    A line cut short by a run still writing it, or otherwise not JSON, is skipped.
    """
    with path.open(encoding="utf-8") as f:
        total = sum(1 for _ in f)
    stride = max(1, math.ceil(total / max_points))
    kept: list[dict] = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % stride and i != total - 1:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                kept.append(record)
    return kept, total


def series_for(records: list[dict], wanted, x_key: str) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for record in records:
        x = record.get(x_key)
        if not isinstance(x, (int, float)):
            continue
        for key, value in record.items():
            if wanted(key) and isinstance(value, (int, float)):
                out.setdefault(key, []).append((float(x), float(value)))
    return out


def summary(records: list[dict]) -> list[tuple[str, str]]:
    last = records[-1]
    evals = [r["eval_return"] for r in records if isinstance(r.get("eval_return"), (int, float))]
    rows = [("env steps", last.get("env_steps")), ("elapsed (s)", last.get("elapsed_s")),
            ("updates", last.get("updates")), ("episodes", last.get("episodes")),
            ("mean return (last 100)", last.get("mean_return_100")), ("last evaluation return", last.get("eval_return")),
            ("best evaluation return", max(evals) if evals else None)]
    return [(name, "-" if value is None else str(value)) for name, value in rows]


def render(records: list[dict], total: int, source: Path) -> str:
    """The report: a summary table, then each chart against env steps and against wall time."""
    table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in summary(records))
    sections = []
    for title, wanted in CHARTS:
        charts = "".join(line_chart(title, label, series_for(records, wanted, key)) for key, label in AXES)
        sections.append(f"<h2>{escape(title)}</h2><div class='row'>{charts}</div>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>tandem run: {escape(str(source.parent.name or source))}</title><style>"
            "body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
            ".row{display:flex;flex-wrap:wrap;gap:1em}h2{font-size:1.1em;margin-top:1.5em}</style></head><body>"
            f"<h1>{escape(str(source))}</h1><p>{total} records"
            f"{f', {len(records)} plotted' if len(records) < total else ''}.</p>"
            f"<table>{table}</table>{''.join(sections)}</body></html>\n")


@click.command("plot")
@click.argument("run_dir", type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the report (default RUN_DIR/report.html).")
@click.pass_obj
def plot_cmd(obj, run_dir: Path, out: Path | None) -> None:
    """Write an HTML report (SVG charts) of a run's curves from RUN_DIR/metrics.jsonl."""
    source = metrics_path(run_dir)
    if not source.is_file():
        obj.fail(f"{source} does not exist: runs write it from the supervisor, once a second", ExitCode.USAGE)
    records, total = load(source)
    if not records:
        obj.fail(f"{source} holds no records yet", ExitCode.FAILURE)
    out = out or source.parent / "report.html"
    try:
        out.write_text(render(records, total, source), encoding="utf-8")
    except OSError as exc:
        obj.fail(f"cannot write {out}: {exc.strerror or exc}", ExitCode.FAILURE)
    click.echo(f"wrote {out} ({total} records)")
