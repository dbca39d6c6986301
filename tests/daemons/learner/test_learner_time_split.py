"""A real learner reports where its loop's time went: in its heartbeat (status, the run's curves) and metrics."""

from __future__ import annotations

import json

import pytest

from tandem.client.bench import learner_work
from tandem.protocol import sockets


def test_a_learner_reports_its_time_split_in_its_heartbeat_and_metrics(tmp_path):
    shape = ["algorithm.batch_size=48", "env.num_envs=3", "actors.unroll_length=8", "algorithm.minibatches=2"]
    learner = learner_work.make_learner("unrolls", str(tmp_path), "cpu", shape)
    try:
        learner.publish()
        unrolls = learner_work.Unrolls(8, 3, behaviour_logp=True)
        for _ in range(2):
            learner.intake.handle(unrolls.next_message())
        assert learner.train_step()  # an update, and the version it makes published
        learner.metrics.tick(float("inf"), learner.intake)  # a window closes and a metrics line is written
        counters = learner.metrics.counters()
        shares = {k.removeprefix("train_"): v for k, v in counters.items() if k.startswith("train_time_")}
        assert set(shares) == {"time_wait", "time_prepare", "time_compute", "time_publish", "time_other"}
        assert shares["time_prepare"] > 0 and shares["time_compute"] > 0 and shares["time_publish"] > 0
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
        learner.metrics.close()
        lines = (learner.disk.dir / "metrics.jsonl").read_text().splitlines()
        assert json.loads(lines[-1])["time_compute"] == shares["time_compute"]
    finally:
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)
