"""`tandem bench learn`: per-seed curves and medians from real runs, and its pure parts (rows, medians, references)."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from tandem.client.bench.learn import compare, medians, seed_record, value_at
from tandem.client.bench.references import load_reference, shipped
from tandem.client.bench.runs import RunFigures
from tandem.client.cli import cli

ROWS = [
    {"elapsed_s": 1.0, "env_steps": 0},
    {"elapsed_s": 2.0, "env_steps": 400, "mean_return_100": 20.0},
    {"elapsed_s": 3.0, "env_steps": 900, "mean_return_100": 60.0, "eval_return": 100.0},
    {"elapsed_s": 4.0, "env_steps": 1600, "mean_return_100": 150.0},
]


def test_value_at_takes_the_newest_value_at_or_before_the_frames():
    assert value_at(ROWS, "mean_return_100", 950) == 60.0
    assert value_at(ROWS, "mean_return_100", 399) is None
    assert value_at(ROWS, "eval_return", 2000) == 100.0  # the last evaluation holds until the next one


def test_a_seed_record_reads_the_curve_and_the_solve():
    summary = {
        "reason": "evaluation return 480.0 >= 475",
        "condition_met_unix": 1010.5,
        "env_steps": 1700,
        "updates": 3,
        "mean_return_100": 170.0,
        "eval_return": 480.0,
        "eval_env_steps": 1200,
    }
    run = seed_record(2, RunFigures(summary=summary, learner_rows=[], rows=ROWS, started_unix=1000.0), 1600, 1)
    # solved by a version trained on 1200 env steps; the actors had made 1700 when its round ended
    assert run["solved"] and run["solve_s"] == 10.5 and run["solve_frames"] == 1200 and run["stop_frames"] == 1700
    assert [p["frames"] for p in run["points"]] == [400, 800, 1200, 1600]
    assert [p["train_return"] for p in run["points"]] == [20.0, 20.0, 60.0, 150.0]
    unsolved = seed_record(
        3,
        RunFigures(
            summary={"reason": "1700 env steps >= 1600", "env_steps": 1700},
            learner_rows=[],
            rows=ROWS,
            started_unix=1000.0,
        ),
        1600,
        4,
    )
    assert not unsolved["solved"] and unsolved["solve_s"] is None and unsolved["frames"] == 6800  # frame skip 4
    both = medians([run, unsolved], limit_frames=1600, limit_s=60.0)
    assert both["solved"] == 1 and both["solve_s"] == pytest.approx((10.5 + 60.0) / 2)  # unsolved counts as the limit
    assert both["solve_frames"] == pytest.approx((1200 + 1600) / 2)
    assert both["stop_frames"] == pytest.approx((1700 + 1600) / 2)
    ratio = compare(both, {"name": "ref", "solve_frames": 1400, "points": [{"frames": 1600, "train_return": 100.0}]})
    assert ratio["solve_frames"]["ratio"] == 1.0
    assert ratio["points"] == [{"frames": 1600, "reference_train_return": 100.0, "tandem_train_return": 85.0}]


def test_references_by_name_or_file_and_clear_errors(tmp_path):
    assert "cartpole-cleanrl-ppo" in shipped()
    ref = load_reference("cartpole-cleanrl-ppo")
    assert ref["solve_frames"] > 0 and "measured" in ref
    with pytest.raises(ValueError, match="no reference named 'nope'; shipped: .*cartpole-cleanrl-ppo"):
        load_reference("nope")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_reference(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must be a JSON object with a 'name'"):
        load_reference(str(bad))


def bench_learn(frames: str, *args: str):
    """`tandem bench learn --config examples/cartpole_appo.toml --frames FRAMES ARGS...`, run in this process."""
    return CliRunner().invoke(
        cli, ["bench", "learn", "--config", "examples/cartpole_appo.toml", "--frames", frames, *args]
    )


@pytest.mark.timeout(150)
def test_bench_learn_runs_real_seeds_and_prints_a_complete_record(tmp_path):
    # an unreachable target: the run goes on to the frames
    result = bench_learn(
        "40000",
        "--seeds",
        "1",
        "--first-seed",
        "2",
        "--limit-s",
        "60",
        "--reference",
        "cartpole-cleanrl-ppo",
        "--set",
        "stop.eval_return=1e9",
        "--keep",
        str(tmp_path / "kept"),
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output.strip().splitlines()[-1])
    assert data["benchmark"] == "learn" and data["frames"] == 40000 and data["frames_per_step"] == 1
    run = data["runs"][0]
    assert run["seed"] == 2  # --first-seed: the seeds measured are 2..2
    assert not run["solved"] and run["frames"] >= 40000 and "env steps >= 40000" in run["reason"]
    assert [p["frames"] for p in run["points"]] == [10000, 20000, 30000, 40000]
    assert run["points"][-1]["reached"] and run["points"][-1]["train_return"] > 9.0  # random play scores ~22
    assert run["frames_per_s"] > 0
    assert data["median"]["seeds"] == 1 and data["reference"]["solve_frames"]["reference"] == 12288
    # --keep: the seed's run directory stays, with its curves; a second bench into it is refused (it would resume)
    kept = tmp_path / "kept" / "seed-2"
    assert (kept / "metrics.jsonl").stat().st_size > 0
    assert tomllib.loads((kept / "config.toml").read_text())["run"]["seed"] == 2
    again = bench_learn("100", "--seeds", "3", "--keep", str(tmp_path / "kept"))
    assert again.exit_code == 2 and "seed-2 exists" in again.output


def test_bench_learn_names_a_bad_reference():
    result = bench_learn("100", "--reference", "nope")
    assert result.exit_code == 2 and "no reference named 'nope'" in result.output


def serial(*args) -> dict:
    result = CliRunner().invoke(cli, ["bench", "serial", "--config", "examples/cartpole_appo.toml", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


@pytest.mark.timeout(120)
def test_bench_serial_is_deterministic_for_a_seed_and_reports_unsolved_seeds_at_the_limit():
    args = ("--seeds", "1", "--first-seed", "3", "--max-steps", "3072", "--max-return", "500")
    first, second = serial(*args), serial(*args)
    assert first["runs"] == [{**second["runs"][0], "train_s": first["runs"][0]["train_s"]}]  # only the time differs
    run = first["runs"][0]
    assert run["seed"] == 3 and run["updates"] == run["env_steps"] // 512
    if not run["solved"]:
        assert first["median_env_steps"] == 3072
    # an easy target is met at the first evaluation
    easy = serial("--seeds", "1", "--target", "5", "--eval-every", "512")
    assert easy["runs"][0]["solved"] and easy["runs"][0]["env_steps"] == 512


def test_bench_serial_refuses_what_it_cannot_run():
    result = CliRunner().invoke(cli, ["bench", "serial", "--config", "examples/cartpole.toml"])
    assert result.exit_code == 2 and "on-policy run" in result.output


@pytest.mark.timeout(120)
def test_the_appo_learning_rule_still_solves_cartpole_in_few_env_steps():
    """The CI smoke test of learning per frame: with the example's settings, 24 of 24 seeds reached a greedy 475
    within 23.6k env steps (docs/learning.md); this asks 300 within 40k of two seeds, a wide margin."""
    data = serial("--seeds", "2", "--target", "300", "--max-steps", "40000", "--max-return", "500")
    assert data["solved"] == 2, data["runs"]
