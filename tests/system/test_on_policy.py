"""The on-policy examples as a user runs them: `tandem up` learns CartPole and Pendulum with APPO, and IMPALA runs."""

from __future__ import annotations

import json

import pytest

from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.harness import ROOT, finish, up


def learner_metrics(tmp_path) -> list[dict]:
    lines = (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def run_until_eval(tmp_path, example: str, eval_return: float, limit_s: float, *overrides: str) -> dict:
    """`tandem up` until the evaluator's mean return reaches `eval_return`; the summary of a run that did."""
    proc = up(
        tmp_path,
        f"stop.eval_return={eval_return}",
        f"stop.seconds={limit_s}",
        "run.seed=1",
        *overrides,
        example=example,
    )
    out, err = finish(proc, limit_s + 60)
    summary = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == ExitCode.OK and "evaluation return" in summary["reason"], (summary, err[-3000:])
    return summary


@pytest.mark.timeout(200)
def test_appo_learns_cartpole_far_above_random_play(tmp_path):
    # Random play averages about 22 steps; 200 over a 20-episode greedy evaluation is learned, not luck.
    summary = run_until_eval(tmp_path, "cartpole_appo.toml", 200.0, 90.0)
    assert summary["eval_return"] >= 200.0
    rows = learner_metrics(tmp_path)
    last = rows[-1]
    assert last["updates"] > 0 and last["batches_malformed"] == 0
    # On-policy: a new version after every update (plus the initial one).
    assert last["version"] >= last["updates"]
    assert 0.0 <= last["sample_lag_mean"] <= 32


@pytest.mark.timeout(200)
def test_appo_learns_pendulum_clearly_above_random_play(tmp_path):
    # Random play scores about -1200 on Pendulum-v1; -500 needs a policy that swings up and holds most episodes.
    summary = run_until_eval(tmp_path, "pendulum_appo.toml", -500.0, 100.0)
    assert summary["eval_return"] >= -500.0


@pytest.mark.timeout(200)
def test_impala_trains_cartpole_through_the_same_daemons(tmp_path):
    # IMPALA's plain policy gradient takes one pass per batch (several passes without clipping collapse it).
    summary = run_until_eval(
        tmp_path,
        "cartpole_appo.toml",
        100.0,
        90.0,
        "algorithm.name='impala'",
        "algorithm.epochs=1",
        "algorithm.minibatches=1",
        "algorithm.entropy_coef=0.01",
    )
    assert summary["eval_return"] >= 100.0
    assert learner_metrics(tmp_path)[-1]["clip_fraction"] == 0.0  # no PPO clipping in plain IMPALA


@pytest.mark.timeout(240)
def test_an_lstm_learns_cartpole_without_velocities_and_keeps_its_memory_after_training(tmp_path, monkeypatch):
    """Only positions are shown: a greedy 20-episode mean of 400 needs the state carried from step to step, by
    the actors, the evaluator and a policy loaded back (a feed-forward policy stays under 60: docs/learning.md)."""
    from tandem import load_policy
    from tandem.client.api.evaluate import play_gym

    summary = run_until_eval(tmp_path, "cartpole_lstm.toml", 400.0, 150.0)
    assert summary["eval_return"] >= 400.0
    assert learner_metrics(tmp_path)[-1]["batches_malformed"] == 0
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    policy = load_policy(tmp_path / "run", checkpoint="solved")
    config = policy.spec.config
    remembered = play_gym(policy, config, episodes=5, seed=3, sample=False, render=None, video=None)
    assert remembered["return"]["mean"] >= 300.0

    class Forgetful:  # the same weights, the state wiped before every step
        def reset(self):
            pass

        def act(self, obs, sample=False):
            policy.reset()
            return policy.act(obs, sample=sample)

    forgot = play_gym(Forgetful(), config, episodes=5, seed=3, sample=False, render=None, video=None)
    assert forgot["return"]["mean"] < remembered["return"]["mean"] / 2


@pytest.mark.timeout(240)
@pytest.mark.parametrize("views", [1, 3])
def test_appo_learns_minigrid_doorkey_from_its_dict_observation(tmp_path, views):
    """The view (a 7x7x3 grid of codes) and the direction travel as arrays of their own, each with its encoder;
    a greedy mean of 0.9 means the key is fetched and the door opened nearly every time (random play: about 0).
    With the last 3 views stacked, each view travels once (PROTOCOL.md 2.1.5) and is rebuilt by the learner."""
    stacked = ["env.id='minigrid_dict:make_stacked'", "env.kwargs={id='MiniGrid-DoorKey-5x5-v0', stack=3}"]
    summary = run_until_eval(tmp_path, "minigrid_doorkey.toml", 0.9, 150.0, *(stacked if views > 1 else []))
    assert summary["eval_return"] >= 0.9
    last = learner_metrics(tmp_path)[-1]
    assert last["batches_malformed"] == 0 and last["batches_received"] > 0
    assert last["batches_framed"] == (last["batches_received"] if views > 1 else 0), last
    # `tandem eval` of the run from elsewhere, without PYTHONPATH: the run recorded where minigrid_dict came from
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    played = subprocess.run(
        [sys.executable, "-m", "tandem", "eval", str(tmp_path / "run"), "--episodes", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=env,
    )
    assert played.returncode == 0, played.stderr[-2000:]
    assert json.loads(played.stdout)["env"].startswith("minigrid_dict:")
