"""`[env.pixels]` on an image env that is not ALE: skip, max-pool, grayscale, resize and stack from TOML keys alone,
frames sent once, and the config mistakes named by their keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import cv2
import numpy as np
import pytest
from click.testing import CliRunner

from tandem.client.api.export import preprocessing
from tandem.client.cli import cli
from tandem.daemons.acting.stepping import make_stepping
from tandem.daemons.config.loader import config_from_dict, load_config
from tandem.daemons.envs.atari import GAME_RETURN
from tandem.daemons.envs.gym_envs import EnvGroup, EnvSetupError, make_env
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.fields import ConfigError
from tandem.protocol import TransitionBatch, stacks
from tests.pixel_envs import BLOCK_H, TOP, block_x, frame

SKIP, STACK, SIZE = 4, 4, 84
GRAY = np.array([0.2125, 0.7154, 0.0721])  # gymnasium's GrayscaleObservation weights


def toml_config(tmp_path, pixels: str = "", env: str = ""):
    """A run config from TOML text only, as a user writes it."""
    path = tmp_path / "pixels.toml"
    path.write_text(f"""
[env]
id = "tests.pixel_envs:MovingBlock"
num_envs = 2
{env}

[env.pixels]
enabled = true
{pixels}
""")
    return load_config(path)


def processed(t: int) -> np.ndarray:
    """The reference for agent frame ending at raw frame `t`: max of raw frames t-1 and t (just t at a reset),
    grayscale, resized to 84x84 by area."""
    raw = frame(t) if t == 0 else np.maximum(frame(t - 1), frame(t))
    gray = np.sum(raw * GRAY, axis=-1).astype(np.uint8)
    return cv2.resize(gray, (SIZE, SIZE), interpolation=cv2.INTER_AREA)


@contextmanager
def started(env_section, training: bool = True) -> Iterator[tuple]:
    """The env `env_section` builds, reset with seed 0: (env, its first observation); closed afterwards."""
    env = make_env(env_section, training)
    try:
        obs, _ = env.reset(seed=0)
        yield env, obs
    finally:
        env.close()


def test_toml_keys_alone_give_stacks_of_skipped_max_pooled_grayscale_84x84_frames(tmp_path):
    config = toml_config(tmp_path, env="kwargs = { episode_frames = 30 }")
    assert config.env.frames_per_obs((STACK, SIZE, SIZE)) == STACK
    env = make_env(config.env)
    try:
        assert env.observation_space.shape == (STACK, SIZE, SIZE) and env.observation_space.dtype == np.uint8
        obs, _ = env.reset(seed=0)
        assert obs.shape == (STACK, SIZE, SIZE) and obs.dtype == np.uint8
        for i in range(STACK):  # a reset's stack is its first frame repeated
            np.testing.assert_array_equal(obs[i], processed(0))
        agent_frames = [processed(0)]
        for k in range(1, 7):
            obs, reward, terminated, truncated, _ = env.step(0)
            assert env.unwrapped.t == SKIP * k, "each action steps the env frame_skip frames"
            assert reward == sum(range(SKIP * k - SKIP + 1, SKIP * k + 1)), "rewards of the skipped frames are summed"
            assert not terminated and not truncated
            agent_frames.append(processed(SKIP * k))
            window = [
                agent_frames[max(0, k - STACK + 1 + i)] for i in range(STACK)
            ]  # oldest first, padded at the reset
            np.testing.assert_array_equal(obs, np.stack(window))
        assert env.unwrapped.actions == [0] * SKIP * 6
    finally:
        env.close()


def test_the_max_pool_shows_the_last_two_frames_and_no_earlier_one(tmp_path):
    # The block moves 8 columns a frame: a pooled frame shows it at frames 4k-1 and 4k (16 columns wide, 8.4
    # after resizing 160 -> 84), not where it was at 4k-2.
    with started(toml_config(tmp_path, pixels="frame_stack = 1").env) as (env, _):
        obs, *_ = env.step(0)
        obs, *_ = env.step(0)  # raw frames 5..8; the block at x = 56..64 (frame 7) and 64..72 (frame 8)
        assert obs.shape == (1, SIZE, SIZE)
        row = obs[0, (TOP + BLOCK_H // 2) * SIZE // 210]
        bright = np.flatnonzero(row > 100)
        scale = SIZE / 160
        assert bright.min() == pytest.approx(block_x(7) * scale, abs=1) and bright.max() == pytest.approx(
            (block_x(8) + 8) * scale, abs=1
        )
        assert row[int(block_x(6) * scale) - 1] < 50, "frame 6 is not in the pool"


def test_a_short_episode_ends_inside_a_skip_and_truncation_counts_agent_steps(tmp_path):
    with started(toml_config(tmp_path, env="kwargs = { episode_frames = 10 }").env) as (env, _):
        env.step(0), env.step(0)
        _, reward, terminated, _, info = env.step(0)  # frames 9, 10: the episode ends after two of the four
        assert terminated and env.unwrapped.t == 10 and reward == 9 + 10
        assert info[GAME_RETURN] == sum(range(11)), "the env's own return is reported when the episode ends"
    with started(toml_config(tmp_path, env="max_episode_steps = 3").env) as (env, _):
        results = [env.step(0) for _ in range(3)]
        assert [r[3] for r in results] == [False, False, True] and env.unwrapped.t == 3 * SKIP


def test_rewards_are_clipped_for_training_only_and_returns_stay_the_envs_own(tmp_path):
    config = toml_config(tmp_path, pixels="clip_rewards = true", env="kwargs = { episode_frames = 12 }")
    group = EnvGroup([make_env(config.env) for _ in range(2)], seed=0, games=config.env.games)
    try:
        rewards = [group.step(np.zeros(2, np.int64)) for _ in range(3)]
        assert all(np.all(r.rewards == 1.0) for r in rewards)  # each summed reward (> 0) clipped to its sign
        assert [e[0] for e in rewards[-1].episodes] == [float(sum(range(13)))] * 2  # the env's own return, 78
    finally:
        group.close()
    with started(config.env, training=False) as (evaluator_env, _):
        assert evaluator_env.step(0)[1] == 1 + 2 + 3 + 4


def test_colour_and_single_channel_frames(tmp_path):
    colour = toml_config(tmp_path, pixels="grayscale = false")
    with started(colour.env) as (env, obs):
        assert obs.shape == (STACK * 3, SIZE, SIZE) and colour.env.frames_per_obs(obs.shape) == 1  # sent whole
        resized = cv2.resize(frame(0), (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(obs[:3], np.moveaxis(resized, -1, 0))  # channels first, oldest frame first
    for channels in (0, 1):  # HxW and HxWx1 frames are grayscale already
        config = toml_config(tmp_path, env=f"kwargs = {{ channels = {channels} }}")
        with started(config.env) as (env, obs):
            obs, *_ = env.step(0)
            assert obs.shape == (STACK, SIZE, SIZE)
            raw = np.maximum(frame(3, 1), frame(4, 1))[..., 0]
            np.testing.assert_array_equal(obs[-1], cv2.resize(raw, (SIZE, SIZE), interpolation=cv2.INTER_AREA))


def play(config, unrolls: int, seed: int, frames: bool = True) -> list[TransitionBatch]:
    """What an actor's stepping pushes: stacks kept as frames (or with `frames` False, whole: the reference)."""
    envs = config.env.num_envs
    stepping = make_stepping([make_env(config.env) for _ in range(envs)], "gymnasium", config, "actor-0", seed, 0)
    if not frames:
        stepping.frame_stack = 1
    rng = np.random.default_rng(seed)
    try:
        assert stepping.stacks_checked is False or not frames, "FrameStackObservation outermost: kept unchecked"
        while len(stepping.outbox) < unrolls:
            stepping.tick(lambda policy, obs, idx: (rng.integers(0, 2, len(idx)), {}), {"default": 0})
    finally:
        stepping.close()
    return stepping.outbox


def test_an_actor_sends_each_pixel_frame_once_and_the_learner_rebuilds_every_stack(tmp_path):
    # Episodes of 10 frames end by termination inside a skip (3rd agent step); a limit of 5 agent steps cuts
    # those of 30 frames (truncation, final_obs).
    config = toml_config(tmp_path, env="kwargs = { episode_frames = [10, 30] }\nmax_episode_steps = 5")
    config.actors.unroll_length = 8
    kept, whole = play(config, 6, seed=1), play(config, 6, seed=1, frames=False)
    assert sum(int(b.terminated.sum()) for b in whole) >= 2 and sum(int(b.truncated.sum()) for b in whole) >= 2
    sent = 0
    for packed, batch in zip(kept, whole, strict=True):
        assert packed.obs_stack == STACK and packed.obs.shape == (9, 2, SIZE, SIZE)
        wire = [bytes(f) for f in packed.to_frames()]
        sent += sum(len(f) for f in wire)
        got = stacks.unpack(TransitionBatch.from_frames(wire))
        np.testing.assert_array_equal(got.obs, batch.obs)
        np.testing.assert_array_equal(got.final_obs, batch.final_obs)
    assert sent < 0.4 * sum(b.obs.nbytes + b.final_obs.nbytes for b in whole)


def test_pixels_on_an_observation_that_is_no_image_is_a_setup_mistake_naming_the_key_and_space(tmp_path):
    config = config_from_dict({"env": {"id": "CartPole-v1", "pixels": {"enabled": True}}})
    with pytest.raises(
        EnvSetupError, match=r"env.pixels.enabled: the env's observation space is Box\(.*\(4,\), float32\)"
    ):
        make_env(config.env)
    path = tmp_path / "cartpole_pixels.toml"
    path.write_text('[env]\nid = "CartPole-v1"\n\n[env.pixels]\nenabled = true\n')
    result = CliRunner().invoke(cli, ["config", "check", str(path)])
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "env.pixels.enabled" in result.output and "(4,), float32" in result.output and "HxWxC" in result.output
    assert "Traceback" not in result.output
    rgba = toml_config(tmp_path, env="kwargs = { channels = 4 }")
    with pytest.raises(EnvSetupError, match="env.pixels.grayscale: frames of shape .* have 4 channels"):
        make_env(rgba.env)


@pytest.mark.parametrize(
    "pixels, env, key",
    [
        ({"enabled": True}, {"atari": {"enabled": True}, "id": "ALE/Pong-v5"}, "env.pixels.enabled"),
        ({"enabled": True}, {"vector": "envpool"}, "env.vector"),
        ({"enabled": True}, {"vector": "ale"}, "env.vector"),
        ({"enabled": True, "frame_skip": 0}, {}, "env.pixels.frame_skip"),
    ],
)
def test_impossible_pixel_configs_name_their_key(pixels, env, key):
    with pytest.raises(ConfigError) as info:
        config_from_dict({"env": {"id": "tests.pixel_envs:MovingBlock", **env, "pixels": pixels}})
    assert info.value.key == key, info.value


def test_exported_policies_say_what_the_frames_went_through(tmp_path):
    words = preprocessing(toml_config(tmp_path))["describe"]
    assert "MaxAndSkipObservation(skip=4)" in words and "ResizeObservation((84, 84))" in words
    assert "FrameStackObservation(4)" in words
