"""The plug-in algorithm of examples/ (reinforce_baseline.py, found beside its config) trains through `tandem up`."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tandem import load_policy
from tandem.client.api.export import export_policy, load_exported
from tandem.client.api.onnx_export import acting_network
from tandem.client.api.trained import PolicyError
from tests.system.test_on_policy import learner_metrics, run_until_eval


@pytest.mark.timeout(200)
def test_the_example_plugin_learns_cartpole_through_the_daemons(tmp_path):
    # Random play averages about 22 steps over a greedy evaluation; 100 is learned.
    summary = run_until_eval(tmp_path, "cartpole_reinforce.toml", 100.0, 90.0)
    assert summary["eval_return"] >= 100.0
    last = learner_metrics(tmp_path)[-1]
    assert last["updates"] > 0 and last["batches_malformed"] == 0 and "pg_loss" in last
    # What it learned loads as any built-in algorithm's policy does (the state names its algorithm).
    policy = load_policy(tmp_path / "run")
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    assert policy.act(obs) in (0, 1)
    # It exports as a built-in one does (its weights: those it was loaded with) and acts the same loaded back;
    # ONNX, which needs the torch network itself, refuses it by name rather than with a traceback.
    export_policy(policy, tmp_path / "exported")
    again = load_exported(tmp_path / "exported")
    states = [gym.make("CartPole-v1").reset(seed=seed)[0] for seed in range(5)]
    assert [again.act(s) for s in states] == [policy.act(s) for s in states]
    with pytest.raises(PolicyError, match="--format safetensors"):
        acting_network(policy)
