"""Where a learner's time goes: each part's share of a window, and a real learner's loop reporting them."""

from __future__ import annotations

import pytest

from tandem.daemons.learner.time_split import TimeSplit


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_part_is_its_share_of_the_window_and_the_rest_is_other():
    clock = Clock()
    split = TimeSplit(clock)
    assert split.shares == {}
    with split.timing("prepare"):
        clock.now += 1.0
    with split.timing("compute"):
        clock.now += 2.5
    clock.now += 0.5  # the loop's chores: counted in no part
    shares = split.close_window()
    assert shares == pytest.approx(
        {"time_wait": 0.0, "time_prepare": 0.25, "time_compute": 0.625, "time_publish": 0.0, "time_other": 0.125}
    )
    with split.timing("wait"):
        clock.now += 2.0
    assert split.close_window()["time_wait"] == 1.0  # a new window: what came before is not in it
    assert split.close_window() == split.shares  # an empty window keeps the last shares


def test_a_part_that_raises_is_still_counted():
    clock = Clock()
    split = TimeSplit(clock)
    with pytest.raises(RuntimeError), split.timing("publish"):
        clock.now += 1.0
        raise RuntimeError("send failed")
    clock.now += 1.0
    assert split.close_window()["time_publish"] == 0.5


def test_a_learner_reports_its_time_split_in_its_heartbeat_and_metrics(tmp_path):
    import json

    from tandem.client.bench import learner_work
    from tandem.protocol import sockets

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
