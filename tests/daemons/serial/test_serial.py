"""Serial mode (`tandem up --serial`): one process, the daemons' code paths, the same result for a seed."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.daemons.config.loader import load_config
from tandem.daemons.serial.loop import run_serial

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PLUGIN_CONFIG = EXAMPLES / "cartpole_reinforce.toml"


@pytest.fixture
def beside(monkeypatch):
    """The examples' folder on the import path, as `tandem up` puts a config's folder there."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("reinforce_baseline", None)


# What a record measures in wall time: a seed fixes the rest
WALL_CLOCK = {"time", "elapsed_s", "env_steps_per_s", "updates_per_s"}


def records(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in WALL_CLOCK} for line in path.read_text().splitlines()
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("config_file", [PLUGIN_CONFIG, EXAMPLES / "cartpole_appo.toml"])
def test_two_serial_runs_of_one_seed_give_identical_metrics_and_weights(tmp_path, beside, config_file):
    config = load_config(config_file, ["stop.env_steps=3072", "stop.seconds=100", "run.seed=5"])
    first = run_serial(config, eval_every=1024, directory=tmp_path / "a")
    second = run_serial(config, eval_every=1024, directory=tmp_path / "b")
    assert first.figures["updates"] == 6 and first.reason == "3072 env steps >= 3072"
    assert first.weights.keys() == second.weights.keys()
    for name, tensor in first.weights.items():
        np.testing.assert_array_equal(tensor, second.weights[name], err_msg=name)
    assert records(tmp_path / "a" / "metrics.jsonl") == records(tmp_path / "b" / "metrics.jsonl")
    assert len(records(tmp_path / "a" / "metrics.jsonl")) == 3  # one a round of evaluation
    other = run_serial(load_config(config_file, ["stop.env_steps=3072", "run.seed=6"]), eval_every=1024)
    assert any(not np.array_equal(t, other.weights[n]) for n, t in first.weights.items())  # the seed matters


@pytest.mark.timeout(150)
def test_the_plugin_example_learns_cartpole_serially_and_stops_on_its_condition(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["up", str(PLUGIN_CONFIG), "--serial", "--json", "--quiet", "--eval-every", "5120"]
        + ["--set", f"run.dir='{tmp_path}/run'", "--set", "stop.eval_return=150"],
    )
    sys.modules.pop("reinforce_baseline", None)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["reason"].startswith("evaluation return") and summary["eval_return"] >= 150, summary
    assert summary["serial"] and summary["batches_malformed"] == 0
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["eval_return"] == summary["eval_return"] and last["updates"] == summary["updates"]


def test_serial_mode_needs_a_stop_condition(tmp_path):
    config = load_config(EXAMPLES / "cartpole_appo.toml")
    config = dataclasses.replace(config, stop=dataclasses.replace(config.stop, eval_return=None, seconds=None))
    with pytest.raises(ValueError, match="needs a \\[stop\\] condition"):
        run_serial(config)
