"""`tandem plot RUN_DIR`: an HTML report with the run's series, from a metrics.jsonl the supervisor's writer made."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from click.testing import CliRunner

from client.cli import cli
from client.plot_cmd import load
from daemons.supervisor.run_metrics import RunMetricsLog


def write_run(directory, records: int) -> None:
    curves = RunMetricsLog(directory, tensorboard=False)
    for i in range(records):
        curves.write({"elapsed_s": float(i), "env_steps": 1000 * i, "env_steps_per_s": 1000.0, "updates_per_s": 5.0,
                      "mean_return_100": 10.0 + i, "eval_return": 20.0 + 2 * i if i > 2 else None, "lag_mean": 0.5,
                      "batches_dropped": 0, "policies": {"a": {"eval_return": float(i), "train": {"entropy": 0.4}},
                                                         "b": {"eval_return": 1.0}},
                      "train": {"policy_loss": -0.01, "value_loss": 0.2, "entropy": 0.6 - 0.01 * i, "approx_kl": 0.01,
                                "clip_fraction": 0.1, "explained_variance": 0.5, "grad_norm": 0.4}},
                     wall_time=1000.0 + i)
    curves.close()


def polyline(html: str, name: str) -> list[str]:
    """The points of each chart's polyline for series `name` (one chart against env steps, one against time)."""
    return re.findall(rf'<polyline data-series="{re.escape(name)}"[^>]* points="([^"]*)"', html)


def test_plot_writes_a_report_with_each_series_against_steps_and_time(tmp_path):
    write_run(tmp_path, 10)
    (tmp_path / "metrics.jsonl").open("a").write('{"time": 1')  # a line the running supervisor is still writing
    result = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "report.html").read_text()
    for name in ("mean_return_100", "eval_return", "policies/a/eval_return", "policies/b/eval_return",
                 "env_steps_per_s", "updates_per_s", "lag_mean", "batches_dropped", "train/policy_loss",
                 "train/value_loss", "train/entropy", "policies/a/train/entropy", "train/approx_kl",
                 "train/clip_fraction", "train/explained_variance"):
        charts = polyline(html, name)
        assert len(charts) == 2, name
    assert [len(points.split()) for points in polyline(html, "mean_return_100")] == [10, 10]
    assert len(polyline(html, "eval_return")[0].split()) == 7  # only the records that had one
    assert "best evaluation return</th><td>38.0" in html
    svgs = re.findall(r"<svg.*?</svg>", html)
    assert not polyline(html, "train/grad_norm")  # recorded, but in no chart
    assert len(svgs) == 18 and all(ET.fromstring(svg) is not None for svg in svgs)  # well-formed inline SVG


def test_plot_takes_the_file_and_an_out_path(tmp_path):
    write_run(tmp_path, 3)
    out = tmp_path / "elsewhere.html"
    result = CliRunner().invoke(cli, ["plot", str(tmp_path / "metrics.jsonl"), "--out", str(out)])
    assert result.exit_code == 0 and "3 records" in result.output
    assert "<svg" in out.read_text() and not (tmp_path / "report.html").exists()


def test_a_long_run_is_thinned_to_a_bound_keeping_the_last_record(tmp_path):
    write_run(tmp_path, 50)
    records, total = load(tmp_path / "metrics.jsonl", max_points=10)
    assert total == 50 and len(records) <= 11 and records[-1]["env_steps"] == 49_000


def test_a_run_without_records_is_a_clear_error(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    result = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert result.exit_code == 1 and "no records" in result.output
