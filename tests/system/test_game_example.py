"""The example as a user runs it: `tandem up examples/game_cartpole.toml`, then two game processes that learn."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from daemons.runtime.exit_codes import ExitCode
from tests.system.harness import ROOT, finish, up


@pytest.mark.timeout(150)
def test_two_game_processes_train_the_learner_through_the_action_server(tmp_path):
    proc = up(tmp_path, "stop.seconds=35", "eval.enabled=false", "algorithm.batch_size=256", example="game_cartpole.toml")
    games = subprocess.run([sys.executable, str(ROOT / "examples" / "cartpole_game.py"), "--run-dir",
                            str(tmp_path / "run"), "--games", "2", "--seconds", "25"],
                           capture_output=True, text=True, timeout=90, cwd=tmp_path)
    out, err = finish(proc, 60)
    assert games.returncode == 0, games.stderr[-3000:]
    assert proc.returncode == ExitCode.OK, err[-3000:]
    played = [line for line in games.stdout.splitlines() if line.startswith("game ")]
    assert len(played) == 2 and all(" 0 steps" not in line for line in played), games.stdout
    rows = [json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["updates"] > rows[0]["updates"] and rows[-1]["batches_malformed"] == 0, rows[-1]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["env_steps"] > 1000, summary
