"""Learners of Atari policies take batches of frames sent once (PROTOCOL.md 2.1.2) and drop malformed ones."""

from __future__ import annotations

import dataclasses

import msgpack
import numpy as np
import pytest

from tandem.daemons.config import load_config
from tandem.daemons.learner.daemon import Learner
from tandem.daemons.replay import FrameReplay
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import TransitionBatch, sockets, stacks
from tests.system.harness import ROOT

STEPS, ENVS = 4, 2


def stacked_batch(seq: int, seed: int = 0) -> TransitionBatch:
    """A valid stacked Pong-shaped batch: random frames, an episode end, and the log-probs APPO needs."""
    rng = np.random.default_rng(seed)
    terminated = np.zeros((STEPS, ENVS), bool)
    terminated[1, 0] = True
    truncated = np.zeros((STEPS, ENVS), bool)
    truncated[2, 1] = True
    return TransitionBatch(
        policy_id="default",
        actor_id="actor-0",
        incarnation=1,
        seq=seq,
        policy_version=0,
        env_steps=0,
        obs=rng.integers(0, 255, (STEPS + 1, ENVS, 84, 84), np.uint8),
        actions=rng.integers(0, 6, (STEPS, ENVS)),
        rewards=np.zeros((STEPS, ENVS), np.float32),
        terminated=terminated,
        truncated=truncated,
        final_obs=rng.integers(0, 255, (1, 84, 84), np.uint8),
        extras={"behaviour_logp": np.full((STEPS, ENVS), np.log(1 / 6), np.float32)},
        obs_stack=4,
        obs_history=rng.integers(0, 255, (ENVS, 3, 84, 84), np.uint8),
    )


def frames(batch: TransitionBatch, **header) -> list[bytes]:
    out = [bytes(f) for f in batch.to_frames()]
    if header:
        h = msgpack.unpackb(out[0])
        h.update(header)
        out[0] = msgpack.packb(h)
    return out


@pytest.fixture(params=["appo", "double_dqn"])
def pong_learner(request, tmp_path):
    overrides = [
        f"run.dir='{tmp_path}'",
        f"algorithm.name='{request.param}'",
        f"algorithm.batch_size={STEPS * ENVS}",
        "learner.replay_min_size=8",
        "learner.replay_capacity=1000",
        "learner.samples_per_insert=1.0",
    ]
    learner = Learner(
        load_config(ROOT / "examples" / "pong_appo.toml", overrides), "default", StopFlag(), control_endpoint=None
    )
    learner.build()
    learner.binding.bind()
    yield learner
    learner.metrics.close()
    sockets.close_context(learner.runtime.ctx, 0)


def test_stacked_batches_are_trained_on_and_malformed_ones_counted_and_dropped(pong_learner):
    learner = pong_learner
    good = stacked_batch(seq=0)
    bad = [
        frames(good, obs_stack=3),  # history no longer [K, S-1, ...]: a framing error
        frames(dataclasses.replace(good, obs_stack=3, obs_history=good.obs_history[:, :2])),  # [3, 84, 84] obs
        frames(good, obs_stack="4"),
        frames(
            dataclasses.replace(
                good, obs=good.obs[:, :, :80], final_obs=good.final_obs[:, :80], obs_history=good.obs_history[:, :, :80]
            )
        ),  # frames of another size
        frames(
            dataclasses.replace(
                good,
                obs=good.obs.astype(np.float32),
                final_obs=good.final_obs.astype(np.float32),
                obs_history=good.obs_history.astype(np.float32),
            )
        ),  # floats for uint8 frames
    ]
    for message in bad:
        learner.intake.handle(message)
    assert (
        learner.progress.counts["batches_malformed"] == len(bad)
        and learner.progress.counts["transitions_inserted"] == 0
    )
    learner.intake.handle(frames(good))
    learner.intake.handle(frames(stacked_batch(seq=1, seed=1)))
    assert (
        learner.progress.counts["batches_malformed"] == len(bad) and learner.progress.counts["transitions_inserted"] > 0
    )
    if isinstance(getattr(learner.training.feed, "replay", None), FrameReplay):
        sample = learner.training.feed.replay.sample(16)
        assert sample.obs.shape == (16, 4, 84, 84) and sample.next_obs.shape == (16, 4, 84, 84)
    else:  # the on-policy queue keeps frames and hands out whole stacks
        assert learner.training.feed.queue[0].obs_stack == 4
        unrolls = learner.training.feed.next_batch(learner.progress.version)
        np.testing.assert_array_equal(unrolls[0].obs, stacks.unpack(good).obs)
        learner.intake.handle(frames(stacked_batch(seq=2, seed=2)))  # taken above: two more for the update below
        learner.intake.handle(frames(stacked_batch(seq=3, seed=3)))
    assert learner.train_step()
    assert np.isfinite(learner.training.last_metrics["loss"])


def test_a_dqn_learner_checkpoints_its_frame_replay_and_resumes_with_it(tmp_path):
    overrides = [
        f"run.dir='{tmp_path}'",
        "algorithm.name='double_dqn'",
        "learner.replay_capacity=1000",
        "algorithm.batch_size=32",
        "learner.replay_min_size=8",
        "learner.checkpoint_replay=true",
    ]
    config = load_config(ROOT / "examples" / "pong_appo.toml", overrides)
    learner = Learner(config, "default", StopFlag(), control_endpoint=None)
    learner.build()
    try:
        for seq in range(3):
            learner.intake.handle(frames(stacked_batch(seq=seq, seed=seq)))
        replay = learner.training.feed.replay
        assert isinstance(replay, FrameReplay) and len(replay) > 0
        learner.checkpointer.save()
        slots = replay.live_slots()
        want = replay.gather(slots)
    finally:
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)
    again = Learner(config, "default", StopFlag(), control_endpoint=None)
    again.build()
    try:
        got = again.training.feed.replay.gather(again.training.feed.replay.live_slots())
        for name in ("obs", "next_obs", "actions", "returns", "discounts", "versions"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        again.intake.handle(frames(stacked_batch(seq=0, seed=9)))  # a stream after the restart starts afresh
        assert len(again.training.feed.replay) > len(slots)
    finally:
        again.metrics.close()
        sockets.close_context(again.runtime.ctx, 0)
