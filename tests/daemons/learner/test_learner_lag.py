"""The learner's lag accounting on real batches: stale ones are dropped and counted, the rest measured."""

from __future__ import annotations

import numpy as np

from tandem.daemons.config import load_config
from tandem.daemons.learner.daemon import Learner
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import sockets
from tests.protocol import samples
from tests.system.harness import ROOT


def make_learner(tmp_path, max_lag=5):
    config = load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'", f"learner.max_lag={max_lag}"])
    learner = Learner(config, "default", StopFlag(), control_endpoint=None)
    learner.build()
    return learner


def frames(version, seq, actor="actor-0", policy="default"):
    batch = samples.unroll(steps=8, envs=4, seq=seq)
    return [
        bytes(f)
        for f in type(batch)(
            **{**batch.__dict__, "policy_version": version, "seq": seq, "actor_id": actor, "policy_id": policy}
        ).to_frames()
    ]


def test_stale_batches_are_dropped_and_counted(tmp_path):
    learner = make_learner(tmp_path, max_lag=5)
    try:
        learner.progress.version = 20
        learner.intake.handle(frames(version=18, seq=0))  # lag 2: kept
        learner.intake.handle(frames(version=14, seq=1))  # lag 6 > 5: dropped
        learner.intake.handle(frames(version=-1, seq=2))  # acted before any weights: dropped
        learner.intake.handle(frames(version=20, seq=3, policy="other"))  # for another policy's learner
        learner.intake.handle([b"\x00junk"])
        c = learner.progress.counts
        assert (c["batches_received"], c["batches_stale"], c["batches_foreign"], c["batches_malformed"]) == (3, 2, 1, 1)
        assert learner.intake.lag_window == [2.0 * 32, 32]
        assert c["transitions_inserted"] == len(learner.training.feed.replay) > 0
        sample = learner.training.feed.replay.sample(16)
        assert np.all(learner.progress.version - sample.versions == 2)
    finally:
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)


def test_versions_rise_across_restarts(tmp_path):
    first = make_learner(tmp_path)
    try:
        assert first.progress.version == 0
        first.binding.bind()
        first.progress.version = 41
        first.publish()
        first.checkpointer.save()
        first.progress.version = 57
        first.publish()  # published after the last checkpoint, then the process dies
    finally:
        first.metrics.close()
        sockets.close_context(first.runtime.ctx, 0)
    second = make_learner(tmp_path)
    try:
        assert second.progress.version == 58
    finally:
        second.metrics.close()
        sockets.close_context(second.runtime.ctx, 0)
