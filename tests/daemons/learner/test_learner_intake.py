"""What a learner does with well-framed batches it cannot train on: count, log, drop, and keep training."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest

from tandem.daemons.config import load_config
from tandem.daemons.learner.daemon import Learner
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import TransitionBatch, WeightBlob, sockets
from tests.protocol import samples
from tests.system.harness import ROOT

STEPS, ENVS = 8, 4


@pytest.fixture
def appo_learner(tmp_path, built_learner):
    return built_learner(
        load_config(
            ROOT / "examples" / "cartpole_appo.toml",
            [f"run.dir='{tmp_path}'", f"algorithm.batch_size={STEPS * ENVS}"],
        )
    )


def good_batch(seq: int, version: int = 0) -> TransitionBatch:
    batch = samples.unroll(steps=STEPS, envs=ENVS, seq=seq, ends=[(2, 1, "terminated"), (5, 3, "truncated")])
    logp = np.full((STEPS, ENVS), np.log(0.5), np.float32)
    return dataclasses.replace(
        batch,
        policy_version=version,
        obs=batch.obs / 100,
        final_obs=batch.final_obs / 100,
        extras={"behaviour_logp": logp},
    )


def with_extras(batch: TransitionBatch, **extras) -> TransitionBatch:
    return dataclasses.replace(batch, extras=extras)


def frames(batch: TransitionBatch) -> list[bytes]:
    return [bytes(f) for f in batch.to_frames()]


BAD_ONES = {
    "missing log-probs": lambda b: with_extras(b),
    "float64 log-probs": lambda b: with_extras(b, behaviour_logp=b.extras["behaviour_logp"].astype(np.float64)),
    "log-probs of another shape": lambda b: with_extras(b, behaviour_logp=np.zeros((STEPS, ENVS, 2), np.float32)),
    "NaN log-probs": lambda b: with_extras(b, behaviour_logp=np.full((STEPS, ENVS), np.nan, np.float32)),
    "an action outside Discrete(2)": lambda b: dataclasses.replace(b, actions=np.full((STEPS, ENVS), 2, np.int64)),
    "float actions": lambda b: dataclasses.replace(b, actions=b.actions.astype(np.float32)),
    "observations of another shape": lambda b: dataclasses.replace(
        b, obs=np.zeros((STEPS + 1, ENVS, 3), np.float32), final_obs=np.zeros((1, 3), np.float32)
    ),
    "a NaN reward": lambda b: dataclasses.replace(
        b, rewards=np.where(np.arange(STEPS)[:, None] == 3, np.nan, b.rewards).astype(np.float32)
    ),
    "an infinite reward": lambda b: dataclasses.replace(b, rewards=np.full((STEPS, ENVS), np.inf, np.float32)),
    "a NaN observation": lambda b: dataclasses.replace(b, obs=np.where(b.obs == b.obs[4, 2, 1], np.nan, b.obs)),
    "a NaN final observation": lambda b: dataclasses.replace(b, final_obs=np.full_like(b.final_obs, np.nan)),
}


@pytest.mark.parametrize("what", list(BAD_ONES))
def test_a_batch_with_bad_on_policy_fields_is_counted_logged_and_dropped(appo_learner, what, caplog):
    learner = appo_learner
    with caplog.at_level(logging.WARNING, logger="tandem.daemons.learner.daemon"):
        learner.intake.handle(frames(BAD_ONES[what](good_batch(seq=0))))
    assert learner.progress.counts["batches_malformed"] == 1
    assert learner.progress.counts["transitions_inserted"] == 0
    assert "dropped a batch this learner cannot train on" in caplog.text
    # The learner goes on: a good batch after the bad one is taken and trained on.
    learner.intake.handle(frames(good_batch(seq=1)))
    assert learner.progress.counts["transitions_inserted"] == STEPS * ENVS
    version = learner.progress.version
    assert learner.train_step()
    assert learner.progress.counts["updates"] == 1 and learner.progress.version == version + 1
    assert np.isfinite(learner.training.last_metrics["loss"])


def test_a_dqn_learner_drops_observations_of_another_shape(tmp_path):
    """A batch that frames well but does not fit the policy's observation space never reaches replay."""
    config = load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'"])
    learner = Learner(config, "default", StopFlag(), control_endpoint=None)
    learner.build()
    try:
        bad = dataclasses.replace(samples.unroll(steps=4, envs=2, obs_shape=(5,)), policy_version=0)
        learner.intake.handle(frames(bad))
        assert learner.progress.counts["batches_malformed"] == 1 and len(learner.training.feed.replay) == 0
        learner.intake.handle(frames(dataclasses.replace(samples.unroll(steps=4, envs=2), policy_version=0)))
        assert learner.progress.counts["transitions_inserted"] > 0
    finally:
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)


def test_on_policy_learner_trains_in_arrival_order_and_drops_what_lagged_too_far(appo_learner):
    learner = appo_learner
    learner.progress.version = 40
    learner.intake.handle(frames(good_batch(seq=0, version=39)))
    learner.intake.handle(frames(good_batch(seq=1, version=40)))
    learner.progress.version = 39 + learner.config.learner.max_lag + 1  # the first unroll is now one version too old
    trained_at = learner.progress.version
    assert learner.train_step()
    assert learner.metrics.counters()["batches_stale"] == 1
    assert learner.training.last_metrics["sample_lag_mean"] == trained_at - 40  # the second unroll was trained on


def test_an_on_policy_learner_resumes_from_its_checkpoint(tmp_path, appo_learner):
    learner = appo_learner
    learner.intake.handle(frames(good_batch(seq=0)))
    assert learner.train_step()
    learner.checkpointer.save()
    saved = learner.training.algorithm.weights()
    config = learner.config
    again = Learner(config, "default", StopFlag(), control_endpoint=None)
    again.build()
    try:
        assert again.progress.counts["updates"] == 1 and again.progress.version > learner.progress.version
        for name, value in saved.items():
            np.testing.assert_array_equal(again.training.algorithm.weights()[name], value)
    finally:
        again.metrics.close()
        sockets.close_context(again.runtime.ctx, 0)


def test_the_env_steps_behind_each_version_are_published_and_go_on_across_a_restart(tmp_path, appo_learner):
    """Every received transition counts (a stale one too: the actors spent it); each published blob carries the
    total, and a restarted learner goes on from its checkpoint's."""
    learner = appo_learner
    learner.progress.version = 40
    learner.intake.handle(frames(good_batch(seq=0, version=40)))
    learner.intake.handle(frames(good_batch(seq=1, version=0)))  # stale: dropped, but its env steps were spent
    assert learner.progress.counts["batches_stale"] == 1 and learner.progress.env_steps == 2 * STEPS * ENVS
    assert learner.train_step()
    assert WeightBlob.from_frames(learner.publisher.latest_frames).env_steps == 2 * STEPS * ENVS
    learner.checkpointer.save()
    again = Learner(learner.config, "default", StopFlag(), control_endpoint=None)
    again.build()
    try:
        again.intake.handle(frames(good_batch(seq=2, version=again.progress.version)))
        assert again.progress.env_steps == 3 * STEPS * ENVS
    finally:
        again.metrics.close()
        sockets.close_context(again.runtime.ctx, 0)


def test_a_batch_claiming_a_version_this_learner_never_published_is_dropped(appo_learner):
    """Versions only rise, across restarts too: a batch from 'the future' was not made with this learner's weights."""
    learner = appo_learner
    learner.intake.handle(frames(good_batch(seq=0, version=learner.progress.version + 1000)))
    assert learner.progress.counts["batches_malformed"] == 1 and learner.progress.counts["transitions_inserted"] == 0
    learner.intake.handle(frames(good_batch(seq=1, version=learner.progress.version)))
    assert learner.progress.counts["transitions_inserted"] == STEPS * ENVS
    assert learner.progress.counts["malformed_version"] == 1


def test_a_dqn_learner_drops_non_finite_values_and_counts_each_bad_batch_under_its_reason(tmp_path):
    """One NaN reward in replay would make every Q-value NaN: such a batch is dropped like any other bad one."""
    config = load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'"])
    learner = Learner(config, "default", StopFlag(), control_endpoint=None)
    learner.build()
    try:
        good = dataclasses.replace(samples.unroll(steps=4, envs=2), policy_version=0)
        nan_rewards = good.rewards.copy()
        nan_rewards[1, 1] = np.nan
        inf_obs = good.obs.astype(np.float32)
        inf_obs[2, 0, 1] = np.inf
        bad = {
            "values": [
                dataclasses.replace(good, rewards=nan_rewards),
                dataclasses.replace(good, obs=inf_obs, final_obs=good.final_obs.astype(np.float32)),
            ],
            "obs_shape": [dataclasses.replace(samples.unroll(steps=4, envs=2, obs_shape=(5,)), policy_version=0)],
            "algorithm": [
                dataclasses.replace(good, actions=np.full((4, 2), 7, np.int64)),
                dataclasses.replace(good, actions=np.zeros((4, 2, 2), np.int64)),
            ],
        }
        for batches in bad.values():
            for batch in batches:
                learner.intake.handle(frames(batch))
        learner.intake.handle([b"\x01not a header"])
        assert len(learner.training.feed.replay) == 0
        counts = learner.progress.counts
        assert {r: counts[f"malformed_{r}"] for r in ("values", "obs_shape", "algorithm", "frames")} == {
            "values": 2,
            "obs_shape": 1,
            "algorithm": 2,
            "frames": 1,
        }
        assert counts["batches_malformed"] == 6
        learner.intake.handle(frames(good))
        assert counts["transitions_inserted"] > 0 and counts["batches_malformed"] == 6
    finally:
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)


def test_a_learner_whose_metrics_cannot_be_written_counts_it_and_trains_on(tmp_path):
    """A full disk (here /dev/full, which refuses every write with ENOSPC) under metrics.jsonl ends nothing."""
    from tandem.daemons.learner.metrics_log import MetricsLog

    config = load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'"])
    learner = Learner(config, "default", StopFlag(), control_endpoint=None)
    learner.build()
    learner.metrics.log.close()
    learner.metrics.log = MetricsLog(Path("/dev/full"))
    try:
        learner.metrics.write()
        learner.metrics.write()
        assert learner.progress.counts["disk_write_failures"] == 2
    finally:
        learner.metrics.close()  # what is still buffered cannot be written either: logged, not raised
        sockets.close_context(learner.runtime.ctx, 0)


def test_the_learner_heartbeats_between_the_steps_of_an_update(appo_learner):
    """A slow update must not look like a hung learner: the algorithm's progress hook is the reporter's tick."""
    learner = appo_learner
    beats = []
    learner.runtime.reporter.tick = lambda now=None: beats.append(now) or False
    learner.training.algorithm.progress = learner.runtime.reporter.tick  # as build() wires it, with the tick counted
    learner.intake.handle(frames(good_batch(seq=0)))
    assert learner.train_step()
    steps = learner.config.algorithm.epochs * learner.config.algorithm.minibatches
    assert len(beats) == steps


def test_build_wires_the_progress_hook_to_the_heartbeat(appo_learner):
    assert appo_learner.training.algorithm.progress == appo_learner.runtime.reporter.tick
