"""A resumed run's curves go on from where its earlier starts ended; --fresh moves them aside with the learners'."""

from __future__ import annotations

import json

from tandem.daemons.settings.schema import StopSection
from tandem.daemons.supervisor.progress import RunView
from tandem.daemons.supervisor.resume import move_previous
from tandem.daemons.supervisor.run_metrics import RunMetricsLog
from tandem.daemons.supervisor.segments import Earlier, earlier_starts
from tests.daemons.supervisor.builders import beat


def test_earlier_starts_are_read_from_the_last_whole_record(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert earlier_starts(path) == Earlier()  # a new run
    path.write_text("")
    assert earlier_starts(path) == Earlier()
    curves = RunMetricsLog(tmp_path, tensorboard=False)
    curves.write({"segment": 2, "elapsed_s": 1.0, "env_steps": 4000, "episodes": 30})
    curves.write({"segment": 2, "elapsed_s": 2.0, "env_steps": 5000, "episodes": 41})
    curves.close()
    with path.open("a") as f:
        f.write('{"time": 9.0, "segment": 2, "elapsed_s": 3.0, "env_st')  # the machine went down mid-write
    assert earlier_starts(path) == Earlier(segment=2, env_steps=5000, episodes=41)
    path.write_text(json.dumps({"time": 1.0, "elapsed_s": 9.0, "env_steps": 700}) + "\n")  # before `segment`
    assert earlier_starts(path) == Earlier(segment=1, env_steps=700, episodes=0)


def test_a_resumed_view_counts_on_and_stops_at_the_runs_total():
    view = RunView(StopSection(env_steps=6000), started=0.0)
    assert view.figures(0.0)["segment"] == 1
    view.continue_from(Earlier(segment=1, env_steps=5000, episodes=40))
    fig = view.figures(0.0)
    assert (fig["segment"], fig["env_steps"], fig["episodes"], fig["env_steps_per_s"]) == (2, 5000, 40, 0.0)
    view.heartbeat(beat("actor-0", env_steps=0), 0.0)
    view.heartbeat(beat("actor-0", env_steps=500), 1.0)
    view.episodes_report([10.0, 12.0], 1.0)
    fig = view.figures(1.0)
    assert fig["env_steps"] == 5500 and fig["episodes"] == 42
    assert fig["env_steps_per_s"] == 500.0  # the carried steps are no burst of speed
    assert fig["elapsed_s"] == 1.0  # this start's seconds, as stop.seconds counts them
    assert view.stop_reason(1.0) is None
    view.heartbeat(beat("actor-0", env_steps=1000), 2.0)
    assert view.stop_reason(2.0) == "6000 env steps >= 6000"


def test_fresh_moves_the_runs_curves_aside_with_the_learners(tmp_path):
    (tmp_path / "learner-default").mkdir()
    (tmp_path / "learner-default" / "ckpt-000000000007.pt").write_bytes(b"x")
    for name in ("metrics.jsonl", "report.png"):
        (tmp_path / name).write_text("old\n")
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "logs").mkdir()
    moved = move_previous(tmp_path)
    assert sorted(p.name for p in moved.iterdir()) == ["learner-default", "metrics.jsonl", "report.png", "tensorboard"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "previous"]  # logs stay: they are appended to
    assert earlier_starts(tmp_path / "metrics.jsonl") == Earlier()  # the next run is a new one

    (tmp_path / "metrics.jsonl").write_text("old\n")  # curves without checkpoints are moved too
    assert move_previous(tmp_path) is not None and not (tmp_path / "metrics.jsonl").exists()
    assert move_previous(tmp_path) is None
