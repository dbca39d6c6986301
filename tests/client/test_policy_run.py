"""`tandem eval` and `tandem export` on what a real `tandem up` run leaves behind (its learner's own checkpoint,
and the best and solving checkpoints its evaluator kept)."""

from __future__ import annotations

import json

import numpy as np
import torch
from click.testing import CliRunner

from tandem import export_policy, load_exported, load_policy
from tandem.client.cli import cli
from tests.system.harness import finish, up


def test_a_short_real_run_can_be_evaluated_and_exported(tmp_path):
    proc = up(tmp_path, "stop.env_steps=3000", "stop.seconds=60", "eval.enabled=false")
    finish(proc, timeout_s=120)
    assert proc.returncode == 0
    run = tmp_path / "run"
    assert list((run / "learner-default").glob("ckpt-*.pt")), "the learner wrote no checkpoint on stop"

    result = CliRunner().invoke(cli, ["eval", str(run), "--episodes", "3", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert len(report["returns"]) == 3 and report["version"] >= 0
    assert report["return"]["mean"] == np.mean(report["returns"])

    policy = load_policy(run)
    export_policy(policy, tmp_path / "export")
    obs = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    np.testing.assert_array_equal(load_exported(tmp_path / "export").act(obs), policy.act(obs))


def test_a_real_run_keeps_its_best_evaluated_checkpoint_and_the_one_that_solved_it(tmp_path):
    target = 150.0  # reached in seconds on CartPole; rounds at least 2 s apart, so metrics.jsonl has every round
    proc = up(tmp_path, "run.seed=3", f"stop.eval_return={target}", "stop.seconds=150", "eval.interval_s=2")
    out, err = finish(proc, timeout_s=240)
    assert proc.returncode == 0, err[-3000:]
    run, kept = tmp_path / "run", tmp_path / "run" / "learner-default"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    reported = [r["eval_return"] for r in records if isinstance(r, dict) and r.get("eval_return") is not None]
    assert reported, "the evaluator reported no round"
    best = torch.load(kept / "best.pt", map_location="cpu", weights_only=True)
    assert best["evaluation"]["return"] == max(reported), (best["evaluation"], reported)
    assert sorted(p.name for p in kept.iterdir() if p.name.startswith(".")) == []  # no temp file left

    solved_run = "evaluation return" in json.loads(out.strip().splitlines()[-1]).get("reason", "")
    assert (kept / "solved.pt").is_file() == solved_run
    if solved_run:
        solved = torch.load(kept / "solved.pt", map_location="cpu", weights_only=True)
        assert target <= solved["evaluation"]["return"] <= best["evaluation"]["return"]

    result = CliRunner().invoke(cli, ["eval", str(run), "--checkpoint", "best", "--episodes", "3", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["checkpoint"] == str(kept / "best.pt") and report["version"] == best["version"]
    assert report["evaluation"]["return"] == best["evaluation"]["return"]
