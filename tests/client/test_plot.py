"""`tandem plot RUN_DIR`: a matplotlib picture of the run's series, from a metrics.jsonl the supervisor wrote."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.client.plot_cmd import CHARTS, count_label, figure, panels, x_axes
from tandem.client.run_curves import load, series
from tandem.daemons.supervisor.run_metrics import RunMetricsLog

pytest.importorskip("matplotlib", reason="tandem plot draws with matplotlib (a dependency)")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"


def write_run(
    directory, records: int, segment: int | None = None, steps_from: int = 0, every_s: float = 1.0, extra=None
) -> None:
    """`records` records `every_s` apart of one start; `segment=None` writes them as runs did before they carried it."""
    curves = RunMetricsLog(directory, tensorboard=False)
    for i in range(records):
        head = {} if segment is None else {"segment": segment}
        curves.write(
            {
                **head,
                "elapsed_s": every_s * i,
                "env_steps": steps_from + 1000 * i,
                "env_steps_per_s": 1000.0,
                "updates_per_s": 5.0,
                "mean_return_100": 10.0 + i,
                "eval_return": 20.0 + 2 * i if i > 2 else None,
                "lag_mean": 0.5,
                "batches_dropped": 0,
                "policies": {"a": {"eval_return": float(i), "train": {"entropy": 0.4}}, "b": {"eval_return": 1.0}},
                "train": {
                    "policy_loss": -0.01,
                    "value_loss": 0.2,
                    "entropy": 0.6 - 0.01 * i,
                    "approx_kl": 0.01,
                    "clip_fraction": 0.1,
                    "explained_variance": 0.5,
                    "time_compute": 0.6,  # where the learner's time went
                    "time_wait": 0.1,
                    "grad_norm": 0.4,
                    **(extra or {}),
                },
            },
            wall_time=1000.0 + i,
        )
    curves.close()


def svg_lines(path) -> dict[str, list[float]]:
    """Each plotted line's id (`x_key:series:segment`) -> the x coordinates of its points in the drawing."""
    out = {}
    for group in ET.parse(path).iter(f"{SVG}g"):
        gid = group.get("id", "")
        if gid.count(":") >= 2 and (path_el := group.find(f"{SVG}path")) is not None:
            numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path_el.get("d"))]
            out[gid] = numbers[0::2]
    return out


def test_plot_writes_a_png_with_every_chart(tmp_path):
    write_run(tmp_path, 10)
    (tmp_path / "metrics.jsonl").open("a").write('{"time": 1')  # a line the running supervisor is still writing
    result = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "11 records" in result.output
    png = (tmp_path / "report.png").read_bytes()
    assert png.startswith(PNG_MAGIC)
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width >= 1000 and height >= 2000  # two columns of nine charts, not an empty canvas


def test_the_svg_has_each_series_against_steps_and_time_and_real_ticks(tmp_path):
    write_run(tmp_path, 10)
    out = tmp_path / "curves.svg"
    result = CliRunner().invoke(cli, ["plot", str(tmp_path / "metrics.jsonl"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "report.png").exists()
    lines = svg_lines(out)
    for name in (
        "mean_return_100",
        "eval_return",
        "policies/a/eval_return",
        "policies/b/eval_return",
        "env_steps_per_s",
        "updates_per_s",
        "lag_mean",
        "batches_dropped",
        "train/policy_loss",
        "train/value_loss",
        "train/entropy",
        "policies/a/train/entropy",
        "train/approx_kl",
        "train/clip_fraction",
        "train/explained_variance",
    ):
        assert f"env_steps:{name}:1" in lines and f"elapsed_s:{name}:1" in lines, name
    assert len(lines["env_steps:mean_return_100:1"]) == 10
    assert len(lines["env_steps:eval_return:1"]) == 7  # only the records that had one
    assert not [gid for gid in lines if "grad_norm" in gid]  # recorded, but in no chart
    text = out.read_text()
    assert "best evaluation return: 38" in text
    # matplotlib's own tick locator: more than the min and max of each axis
    ticks = [g for g in ET.parse(out).iter(f"{SVG}g") if g.get("id", "").startswith("xtick_")]
    assert len(ticks) >= 4 * len(CHARTS) * 2


def test_a_resumed_run_is_two_segments_on_a_monotone_axis(tmp_path):
    """Two starts of a run, written as the supervisor writes them (the second carries env steps on)."""
    write_run(tmp_path, 6, segment=1)
    write_run(tmp_path, 5, segment=2, steps_from=5000)
    segments, total = load(tmp_path / "metrics.jsonl")
    assert total == 11 and [s.number for s in segments] == [1, 2]
    for x_key in ("env_steps", "elapsed_s"):
        xs = [x for s in segments for x, _ in series(s, lambda k: k == "mean_return_100", x_key)["mean_return_100"]]
        assert xs == sorted(xs), x_key  # never back to the start
    assert segments[1].shift == {"env_steps": 0.0, "elapsed_s": 5.0}  # env steps went on; seconds count from 0

    out = tmp_path / "curves.svg"
    result = CliRunner().invoke(cli, ["plot", str(tmp_path), "--out", str(out)])
    assert result.exit_code == 0 and "2 starts" in result.output, result.output
    lines = svg_lines(out)
    for x_key in ("env_steps", "elapsed_s"):
        first, second = lines[f"{x_key}:mean_return_100:1"], lines[f"{x_key}:mean_return_100:2"]
        assert first == sorted(first) and second == sorted(second) and second[0] >= first[-1], x_key
        assert f"{x_key}:resumed:2" in [g.get("id") for g in ET.parse(out).iter(f"{SVG}g")]


def test_a_file_from_before_segments_is_split_where_its_counters_restart(tmp_path):
    write_run(tmp_path, 6)
    write_run(tmp_path, 4)  # a second start that counted env steps and seconds from 0 again
    segments, _ = load(tmp_path / "metrics.jsonl")
    assert [len(s.records) for s in segments] == [6, 4]
    assert segments[1].shift == {"env_steps": 5000.0, "elapsed_s": 5.0}
    steps = [x for s in segments for x, _ in series(s, lambda k: k == "lag_mean", "env_steps")["lag_mean"]]
    assert steps == [1000.0 * i for i in range(6)] + [5000.0 + 1000.0 * i for i in range(4)]


def test_thinning_keeps_a_bound_and_each_segments_ends(tmp_path):
    write_run(tmp_path, 50, segment=1)
    write_run(tmp_path, 3, segment=2, steps_from=49_000)  # shorter than the stride: still a segment of its own
    segments, total = load(tmp_path / "metrics.jsonl", max_points=10)
    assert total == 53 and sum(len(s.records) for s in segments) <= 14
    assert [s.number for s in segments] == [1, 2]
    assert segments[0].records[-1]["env_steps"] == 49_000 and segments[1].records[-1]["env_steps"] == 51_000
    assert segments[1].shift["elapsed_s"] == 49.0  # from the first segment's last record, thinned or not


def test_a_run_without_records_or_a_wrong_suffix_is_a_clear_error(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    result = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert result.exit_code == 1 and "no records" in result.output
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"time": 1.0, "elapsed_s": 0.0, "env_steps": 0}) + "\n")
    result = CliRunner().invoke(cli, ["plot", str(tmp_path), "--out", str(tmp_path / "report.html")])
    assert result.exit_code == 2 and ".png, .svg or .pdf" in result.output


def drawn(segments):
    """(chart titles, every x tick label, x axis labels, texts inside the charts) of the figure tandem plot saves."""
    import matplotlib.pyplot as plt

    fig = figure(segments, sum(len(s.records) for s in segments), Path("metrics.jsonl"))
    try:
        fig.canvas.draw()  # tick labels are set when drawn
        titles = [ax.get_title(loc="left") for ax in fig.axes]
        ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if t.get_text()]
        xlabels = [ax.get_xlabel() for ax in fig.axes]
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    finally:
        plt.close(fig)
    return titles, ticks, xlabels, texts


def test_a_run_without_self_play_draws_only_the_charts_it_has_data_for(tmp_path):
    write_run(tmp_path, 10)
    segments, _ = load(tmp_path / "metrics.jsonl")
    titles, _, _, texts = drawn(segments)
    expected = [title for title, _ in CHARTS if not title.startswith("Self-play")]
    assert [title for title, _ in panels(segments)] == expected
    assert titles == [title for title in expected for _ in range(2)]  # against env steps and against time
    assert "no data" not in texts

    (tmp_path / "selfplay").mkdir()
    write_run(tmp_path / "selfplay", 10, extra={"rating": 1.5, "pool_win_rate": 0.5})
    segments, _ = load(tmp_path / "selfplay" / "metrics.jsonl")
    assert [title for title, _ in panels(segments)] == [title for title, _ in CHARTS]


def test_x_ticks_read_as_steps_with_k_and_m_and_time_in_its_unit(tmp_path):
    assert [count_label(x) for x in (0, 0.2, 500, 20_000, 1_500_000, 2e9)] == [
        "0",
        "0.2",
        "500",
        "20k",
        "1.5M",
        "2000M",
    ]
    for name, every_s, unit in (("short", 1.0, "s"), ("hour", 600.0, "min"), ("day", 3 * 3600.0, "h")):
        (tmp_path / name).mkdir()
        write_run(tmp_path / name, 10, every_s=every_s)
        segments, _ = load(tmp_path / name / "metrics.jsonl")
        assert x_axes(segments)[1].label == f"training time ({unit})", name
        _, ticks, xlabels, _ = drawn(segments)
        assert f"training time ({unit})" in xlabels
        # no SI milli on an axis of steps or seconds (matplotlib's EngFormatter wrote 200m for 0.2)
        assert ticks and not [t for t in ticks if t.endswith("m")], (name, ticks)
        if unit == "h":  # 27 hours: ticks in hours, not tens of thousands of seconds
            assert max(float(t) for t in ticks if not t.endswith(("k", "M"))) <= 30
