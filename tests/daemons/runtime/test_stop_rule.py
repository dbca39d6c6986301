"""The [stop] rule one run ends by, `tandem up` and serial mode alike: the first condition met, in its words."""

from __future__ import annotations

from tandem.daemons.runtime.stop_rule import stop_reason
from tandem.daemons.settings.schema import StopSection


def reason(stop: StopSection, **figures) -> str | None:
    base = {"eval_return": None, "mean_return": None, "env_steps": 0, "elapsed_s": 0.0}
    return stop_reason(stop, **{**base, **figures})


def test_each_condition_ends_the_run_once_met_and_not_before():
    assert reason(StopSection(eval_return=475.0), eval_return=474.9) is None
    assert reason(StopSection(eval_return=475.0), eval_return=475.0) == "evaluation return 475.0 >= 475"
    assert reason(StopSection(mean_return=200.0), mean_return=None) is None  # fewer than 100 episodes yet
    assert reason(StopSection(mean_return=200.0), mean_return=201.0).startswith("mean return of the last 100")
    assert reason(StopSection(env_steps=6000), env_steps=5999) is None
    assert reason(StopSection(env_steps=6000), env_steps=6000) == "6000 env steps >= 6000"
    assert reason(StopSection(seconds=10.0), elapsed_s=10.4) == "10 s >= 10 s"


def test_an_unset_condition_never_ends_a_run_and_the_evaluation_is_asked_first():
    assert reason(StopSection(), eval_return=1e9, mean_return=1e9, env_steps=10**12, elapsed_s=1e9) is None
    both = StopSection(eval_return=1.0, env_steps=1)
    assert reason(both, eval_return=2.0, env_steps=5).startswith("evaluation return")
