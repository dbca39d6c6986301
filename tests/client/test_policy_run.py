"""`tandem eval` and `tandem export` on what a real `tandem up` run leaves behind (its learner's own checkpoint)."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from client import export_policy, load_exported, load_policy
from client.cli import cli
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
