"""env.vector: GymStepping over gymnasium's Sync/AsyncVectorEnv (and EnvPool) gives the built-in loop's batches."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from tandem.daemons.acting.stepping import actor_envs, make_stepping
from tandem.daemons.config import config_from_dict, load_config
from tandem.daemons.envs.gym_envs import EnvBuildError
from tandem.daemons.envs.vector import VECTOR_API
from tandem.daemons.settings.fields import ConfigError
from tests.daemons.envs.atari_play import play_until_a_game_is_reported
from tests.system.harness import ROOT

K, T = 3, 10


def config(*overrides: str):
    return load_config(
        ROOT / "examples" / "cartpole.toml",
        [f"env.num_envs={K}", "env.max_episode_steps=12", f"actors.unroll_length={T}", *overrides],
    )


def batches(vector: str, seed: int = 5, count: int = 4):
    """`count` batches of a stepping built as an actor builds it, acting by a fixed rule on the observation."""
    cfg = config(f"env.vector='{vector}'")
    stages: list[str] = []
    api, build = actor_envs(cfg, seed)
    stepping = make_stepping(build(stages.append), api, cfg, "actor-0", seed=seed, incarnation=1)
    try:

        def choose(policy, obs, env_index):  # env 0 lets the pole fall (terminated), the others balance it (truncated)
            return np.where(env_index == 0, 0, obs[:, 2] + obs[:, 3] > 0).astype(np.int64), {}

        out = []
        while len(out) < count:
            stepping.tick(choose, {"default": 3})
            out += stepping.outbox
            stepping.outbox.clear()
        return api, stages, out, stepping.episodes, stepping.recent_return_mean()
    finally:
        stepping.close()
        for worker in getattr(getattr(stepping.group, "venv", None), "processes", []):  # async: every worker ended
            assert worker.exitcode == 0, "the worker closed its env and ended"


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_vector_env_batches_equal_the_built_in_loop(vector):
    api0, stages0, expected, episodes0, mean0 = batches("")
    api, stages, got, episodes, mean = batches(vector)
    assert api0 == "gymnasium" and api == VECTOR_API
    assert stages0 == [f"build_env {k}/{K}" for k in range(1, K + 1)] and stages == [f"build_env {vector} x{K}"]
    assert any(b.truncated.any() for b in got) and any(b.terminated.any() for b in got)
    for a, b in zip(expected, got, strict=True):
        b.check_shapes()
        assert (b.seq, b.policy_version, b.env_steps) == (a.seq, a.policy_version, a.env_steps)
        for name in ("obs", "actions", "rewards", "terminated", "truncated", "final_obs"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert episodes == episodes0 > 0 and mean == mean0


def test_vector_with_a_different_seed_differs():
    _, _, a, _, _ = batches("sync", seed=5, count=1)
    _, _, b, _, _ = batches("sync", seed=6, count=1)
    assert not np.array_equal(a[0].obs[0], b[0].obs[0])


def test_bad_vector_value_names_the_key():
    with pytest.raises(ConfigError, match="env.vector"):
        config("env.vector='threads'")


def test_vector_of_a_pettingzoo_env_is_an_error_naming_the_key():
    cfg = config("env.vector='sync'", "env.id='pettingzoo.classic.rps_v2'", "env.max_episode_steps=0")
    with pytest.raises(EnvBuildError, match="env.vector"):
        actor_envs(cfg, 0)


def test_vector_env_that_fails_to_build_is_an_error_not_the_built_in_loop():
    cfg = config("env.vector='async'", "env.id='NoSuchEnv-v0'")
    api, build = actor_envs(cfg, 0)
    with pytest.raises(EnvBuildError, match="NoSuchEnv-v0"):
        build(lambda stage: None)


def test_envpool_missing_is_an_error_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # what `import envpool` meets where it is not installed
    api, build = actor_envs(config("env.vector='envpool'"), 0)
    with pytest.raises(EnvBuildError, match="pip install envpool"):
        build(lambda stage: None)


@pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="envpool is not installed")
def test_envpool_truncates_and_resets_in_the_same_step():
    _, _, got, episodes, _ = batches("envpool", count=2)
    for b in got:
        b.check_shapes()
        assert len(b.final_obs) == int(b.truncated.sum())
        for t, k in np.argwhere(b.truncated | b.terminated):
            assert np.all(np.abs(b.obs[t + 1, k]) <= 0.05)  # the next episode's first obs (CartPole resets)
    assert any(b.truncated.any() for b in got) and episodes > 0


def play_games(kind: str):
    """Breakout with [env.atari] in 2 envs under a fixed random action sequence, until a game is reported."""
    cfg = config_from_dict(
        {"env": {"id": "ALE/Breakout-v5", "num_envs": 2, "vector": kind, "atari": {"enabled": True}}}
    )
    api, build = actor_envs(cfg, 0)
    group = make_stepping(build(lambda stage: None), api, cfg, "actor-0", seed=0, incarnation=0).group
    ends, reported = play_until_a_game_is_reported(group)
    return ends, reported, group.env_steps


@pytest.mark.parametrize(
    "kind",
    [
        "sync",
        "ale",
        pytest.param(
            "envpool",
            marks=pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="envpool is not installed"),
        ),
    ],
)
def test_vector_atari_reports_whole_games_not_lives(kind):
    ends, reported, steps = play_games(kind)
    assert ends >= 5, "the learner saw every lost life of the first game as an episode end"
    assert reported[0][0] >= 0 and reported[0][1] > 0
    assert reported[0][1] >= 5 * 8, "a game of 5 lives lasts longer than 5 short episodes"
    if kind == "sync":  # the same wrappers, seeds and actions as the built-in loop: the same games
        assert (ends, reported, steps) == play_games("")


@pytest.mark.parametrize("kind", ["ale", "envpool"])
def test_native_atari_vectors_need_env_atari(kind):
    api, build = actor_envs(
        config(f"env.vector='{kind}'") if kind == "ale" else config(f"env.vector='{kind}'", "env.atari.enabled=true"), 0
    )
    with pytest.raises(EnvBuildError, match="env.atari.enabled and an 'ALE/Game-v5' env.id"):
        build(lambda stage: None)


def test_ale_vector_clips_rewards_and_steps_stacked_frames():
    cfg = config_from_dict({"env": {"id": "ALE/Pong-v5", "num_envs": 2, "vector": "ale", "atari": {"enabled": True}}})
    api, build = actor_envs(cfg, 0)
    stepping = make_stepping(build(lambda stage: None), api, cfg, "actor-0", seed=0, incarnation=0)
    group = stepping.group
    try:
        assert group.obs.shape == (2, 4, 84, 84) and group.obs.dtype == np.uint8
        assert stepping.stacks_checked  # ALE's own stacking: frames kept, each stack checked as it comes
        rewards = np.concatenate([group.step(np.array([0, 1])).rewards for _ in range(300)])
    finally:
        group.close()
    assert set(rewards) <= {-1.0, 0.0, 1.0} and rewards.min() == -1.0  # standing still, Pong loses points


def test_a_native_vector_whose_observations_the_learner_would_refuse_is_an_error():
    cfg = config_from_dict(
        {"env": {"id": "ALE/Pong-v5", "num_envs": 2, "vector": "ale", "atari": {"enabled": True, "frame_stack": 1}}}
    )
    api, build = actor_envs(cfg, 0)
    with pytest.raises(EnvBuildError, match=r"shape \(1, 84, 84\) uint8, but the learner expects \(84, 84\)"):
        build(lambda stage: None)


@pytest.mark.parametrize(
    "kind",
    [
        "",
        "ale",
        pytest.param(
            "envpool",
            marks=pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="envpool is not installed"),
        ),
    ],
)
def test_native_atari_vectors_truncate_games_as_the_loop_does(kind):
    cfg = config_from_dict(
        {
            "env": {
                "id": "ALE/Pong-v5",
                "num_envs": 2,
                "vector": kind,
                "max_episode_steps": 10,
                "atari": {"enabled": True},
            }
        }
    )
    api, build = actor_envs(cfg, 0)
    group = make_stepping(build(lambda stage: None), api, cfg, "actor-0", seed=0, incarnation=0).group
    try:
        results = [group.step(np.zeros(2, np.int64)) for _ in range(20)]
    finally:
        group.close()
    ends = [t for t, r in enumerate(results) if r.truncated.any() or r.terminated.any()]
    assert ends == [9, 19] and all(results[t].truncated.all() for t in ends)
    assert all(results[t].final_obs.shape == (2, 4, 84, 84) for t in ends)
    # two whole (cut) games of 10 agent steps; ends at 9 and 19: the next game started in the ending step
    assert results[9].episodes == results[19].episodes == [(0.0, 10), (0.0, 10)]
