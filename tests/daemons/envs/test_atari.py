"""The Atari preprocessing from `[env.atari]` on real ALE games: shapes, lives, clipped rewards, true returns."""

from __future__ import annotations

import numpy as np
import pytest

from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.envs.atari import GAME_RETURN
from tandem.daemons.envs.gym_envs import EnvBuildError, EnvGroup, make_env
from tandem.daemons.settings.fields import ConfigError
from tests.daemons.envs.atari_play import play_until_a_game_is_reported


def atari_env(game: str, training: bool, **atari):
    config = config_from_dict(
        {
            "env": {
                "id": f"ALE/{game}-v5",
                "kwargs": {"repeat_action_probability": 0.0},
                "atari": {"enabled": True, **atari},
            }
        }
    )
    return make_env(config.env, training)


def test_observations_are_stacks_of_84x84_grayscale_frames():
    env = atari_env("Pong", training=True)
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        for _ in range(10):
            obs, *_ = env.step(env.action_space.sample())
        assert not np.array_equal(obs[0], obs[3]), "the stack should hold different frames once the game moves"
    finally:
        env.close()


def play_until_game_over(env, rng, limit=20_000):
    """Random play until a step reports the game's return; every (reward, terminated, info) on the way."""
    steps = []
    env.reset(seed=1)
    for _ in range(limit):
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        steps.append((reward, terminated or truncated, info, env.unwrapped.ale.lives()))
        if GAME_RETURN in info:
            return steps
        if terminated or truncated:
            env.reset()
    raise AssertionError(f"no game over in {limit} random steps")


def breakout_game(training: bool) -> list:
    """The steps of one game of Breakout in a training env or an evaluator's, played at random (seed 0)."""
    env = atari_env("Breakout", training)
    try:
        return play_until_game_over(env, np.random.default_rng(0))
    finally:
        env.close()


def test_training_envs_end_episodes_at_lost_lives_clip_rewards_and_keep_the_games_return():
    steps = breakout_game(training=True)
    ends = [lives for _, ended, _, lives in steps if ended]
    assert len(ends) == 5, f"one learner episode per life of Breakout's 5, got {len(ends)}"
    assert ends[:-1] == [4, 3, 2, 1] and ends[-1] == 0  # the game went on after each lost life
    rewards = [reward for reward, *_ in steps]
    assert set(rewards) <= {0.0, 1.0}, "training rewards are clipped to their sign"
    game_return = steps[-1][2][GAME_RETURN]
    assert game_return >= sum(rewards) and sum(rewards) > 0  # bricks of upper rows are worth more than 1


def test_the_evaluators_envs_play_whole_games_with_the_games_own_rewards():
    steps = breakout_game(training=False)
    assert sum(ended for _, ended, _, _ in steps) == 1  # a lost life does not end the episode
    assert steps[-1][2][GAME_RETURN] == pytest.approx(sum(reward for reward, *_ in steps))


def test_an_env_group_reports_games_not_lives():
    envs = [atari_env("Breakout", training=True) for _ in range(2)]
    group = EnvGroup(envs, seed=0, games=True)
    ended, reported = play_until_a_game_is_reported(group)
    assert ended >= 5, "the learner saw every lost life of the first game as an episode end"
    assert group.episodes == len(reported) and reported[0][0] >= 0 and reported[0][1] > 0


def test_atari_preprocessing_on_an_env_that_is_not_atari_is_refused():
    config = config_from_dict({"env": {"id": "CartPole-v1", "atari": {"enabled": True}}})
    with pytest.raises(EnvBuildError, match="not an ALE env"):
        make_env(config.env)
    config = config_from_dict({"env": {"id": "ALE/Pong-v5", "kwargs": {"frameskip": 4}, "atari": {"enabled": True}}})
    with pytest.raises(EnvBuildError, match="env.kwargs.frameskip is 4"):
        make_env(config.env)


def lives_lost_by_a_player_that_never_fires(training: bool, steps=600, **atari) -> int:
    """Lives Breakout took from an always-NOOP player in `steps` steps, resetting at each episode end."""
    env = atari_env("Breakout", training=training, **atari)
    try:
        env.reset(seed=2)
        lost, lives = 0, env.unwrapped.ale.lives()
        for _ in range(steps):
            _, _, terminated, truncated, info = env.step(0)
            now = env.unwrapped.ale.lives()
            lost += max(0, lives - now)
            lives = now
            if GAME_RETURN in info:
                return lost + lives  # the game is over: every life is gone
            if terminated or truncated:
                env.reset()
                lives = env.unwrapped.ale.lives()
        return lost
    finally:
        env.close()


def test_fire_reset_serves_after_every_reset_and_lost_life_in_training():
    assert lives_lost_by_a_player_that_never_fires(True, fire_reset=True) == 5, "each life should be served and lost"
    # the default: the player must press FIRE itself
    assert lives_lost_by_a_player_that_never_fires(True) == 0, "without FIRE Breakout never serves"


def test_fire_reset_in_the_evaluator_serves_only_a_games_first_ball():
    served = lives_lost_by_a_player_that_never_fires(False, fire_reset=True)
    assert served == 1, "a whole game: no reset after a lost life"


def test_fire_reset_is_refused_with_ale_pys_vector_env():
    table = {"env": {"id": "ALE/Breakout-v5", "vector": "ale", "atari": {"enabled": True, "fire_reset": True}}}
    with pytest.raises(ConfigError, match="env.atari.fire_reset"):
        config_from_dict(table)


def test_envpool_is_asked_for_the_same_serve():
    from tandem.daemons.envs.native_vectors import envpool_task

    for fire in (False, True):
        table = {"env": {"id": "ALE/Breakout-v5", "vector": "envpool", "atari": {"enabled": True, "fire_reset": fire}}}
        _, kwargs = envpool_task(config_from_dict(table).env, training=True)
        assert kwargs["use_fire_reset"] is fire
