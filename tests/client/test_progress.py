"""What `tandem up` shows and when it stops, from heartbeats with an explicit clock."""

from __future__ import annotations

from tandem.client.display import format_line
from tandem.daemons.settings.schema import StopSection
from tandem.daemons.supervisor.progress import RunView
from tests.protocol.samples import heartbeat


def beat(name, role, **counters):
    return heartbeat(name, role, counters)


def test_rates_and_totals():
    view = RunView(StopSection(), started=0.0)
    view.heartbeat(beat("actor-0", "actor", env_steps=0, version=1), 0.0)
    view.heartbeat(beat("actor-1", "actor", env_steps=0, version=2), 0.0)
    view.heartbeat(beat("actor-0", "actor", env_steps=1000, version=3), 1.0)
    view.heartbeat(beat("actor-1", "actor", env_steps=1000, version=4, batches_dropped=2), 2.0)
    fig = view.figures(2.0)
    assert fig["env_steps"] == 2000 and fig["env_steps_per_s"] == 1000.0
    assert fig["actor_version_min"] == 3 and fig["batches_dropped"] == 2
    assert "steps 2000" in format_line(fig)


def test_stop_conditions():
    view = RunView(StopSection(eval_return=475.0), started=0.0)
    assert view.stop_reason(1.0) is None
    view.heartbeat(beat("evaluator", "evaluator", eval_return=300.0), 1.0)
    assert view.stop_reason(1.0) is None
    view.heartbeat(beat("evaluator", "evaluator", eval_return=480.0), 2.0)
    assert "evaluation return 480.0" in view.stop_reason(2.0)

    view = RunView(StopSection(mean_return=100.0, seconds=60.0), started=0.0)
    view.episodes_report([200.0] * 99, 1.0)
    assert view.stop_reason(1.0) is None  # needs a full window of 100 episodes
    view.episodes_report([200.0, "junk"], 1.0)
    assert "last 100 episodes" in view.stop_reason(1.0)
    assert RunView(StopSection(seconds=60.0), 0.0).stop_reason(61.0).startswith("61 s")

    view = RunView(StopSection(env_steps=500), started=0.0)
    view.heartbeat(beat("actor-0", "actor", env_steps=600), 1.0)
    assert "600 env steps" in view.stop_reason(1.0)


def test_a_restarted_actor_keeps_its_earlier_steps():
    view = RunView(StopSection(), started=0.0)
    view.heartbeat(beat("actor-0", "actor", env_steps=5000), 1.0)
    view.heartbeat(heartbeat("actor-0", "actor", {"env_steps": 100}, pid=2, incarnation=2), 2.0)
    assert view.env_steps() == 5100
    assert view.figures(2.0)["env_steps_per_s"] >= 0


def test_backpressure_figures():
    view = RunView(StopSection(), started=0.0)
    view.heartbeat(
        beat(
            "learner-default", "learner", updates=10, batches_over_ratio=3, unrolls_dropped_full=4, pace_per_s=12000.0
        ),
        1.0,
    )
    view.heartbeat(beat("actor-0", "actor", env_steps=100, paced_s=1.25), 1.0)
    view.heartbeat(beat("actor-1", "actor", env_steps=100, paced_s=0.5), 1.0)
    fig = view.figures(1.0)
    assert fig["learner_dropped"] == 7 and fig["pace_per_s"] == 12000 and fig["paced_s"] == 1.8
    assert "(learner 7)" in format_line(fig) and "pace 12000/s waited 1.8s" in format_line(fig)
    fig["pace_per_s"] = 0
    assert "pace" not in format_line(fig)


def test_learner_diagnostics_become_train_curves_per_policy_and_are_bounded():
    view = RunView(StopSection(), started=0.0)
    view.heartbeat(beat("learner-default", "learner", updates=3, train_entropy=0.6, train_approx_kl=0.01), 1.0)
    fig = view.figures(1.0)
    assert fig["train"] == {"approx_kl": 0.01, "entropy": 0.6} and "train_entropy" not in fig
    # several policies: each one's under its own name; a peer's endless train_ counters are cut off
    flood = {f"train_x{i:03d}": 1.0 for i in range(100)}
    view.heartbeat(beat("learner-b", "learner", updates=1, **flood), 1.0)
    fig = view.figures(1.0)
    assert "train" not in fig and fig["policies"]["default"]["train"]["entropy"] == 0.6
    assert len(fig["policies"]["b"]["train"]) == 32


def test_a_slow_learner_shows_its_rate_not_zero():
    """One update every 7.5 s (0.13/s), heartbeats every second: the line says 0.13/s at every row, never 0/s."""
    view = RunView(StopSection(), started=0.0)
    shown = []
    for second in range(0, 90):
        view.heartbeat(beat("learner-default", "learner", updates=int(second / 7.5)), float(second))
        if second >= 30:
            fig = view.figures(float(second))
            shown.append(fig["updates_per_s"])
            assert "updates" in format_line(fig) and " (0/s)  episodes" not in format_line(fig), format_line(fig)
    assert min(shown) > 0.08 and max(shown) < 0.21, shown


def test_rate_meter_memory_is_bounded_at_any_call_rate():
    from tandem.daemons.runtime.rate_meter import RateMeter

    meter = RateMeter()
    for i in range(100_000):  # 1000 calls a second for 100 s, a slow counter
        meter.add(i / 1000.0, float(i // 20_000))
    assert len(meter.samples) <= 130 * 4 + 2
    assert 0.0 < meter.rate() < 0.1


def test_a_return_just_below_zero_prints_as_zero_not_minus_zero():
    # the progress line said `return100 -0.0` (tic-tac-toe's self-play returns average about zero)
    from tandem.client.screen import progress_lines

    view = RunView(StopSection(), started=0.0)
    view.heartbeat(beat("actor-0", "actor", env_steps=100, version=1), 1.0)
    fig = {**view.figures(1.0), "mean_return_100": -0.04, "eval_return": -0.0, "agent_returns_100": {"x": -0.01}}
    line = format_line(fig)
    assert "return100 0.0" in line and "eval 0.0" in line and "agents x 0.0" in line and "-0.0" not in line, line
    assert "-0.0" not in "\n".join(progress_lines(fig)) and "return100 0.0" in "\n".join(progress_lines(fig))
    assert "return100 -0.1" in format_line({**fig, "mean_return_100": -0.06})  # a negative return keeps its sign
