"""One policy's learner FATAL in a multi-policy run: the others train on unless the config says to end the run."""

from __future__ import annotations

from pathlib import Path

from tandem.daemons.config import load_config
from tandem.daemons.supervisor.ports import plan_children
from tandem.daemons.supervisor.states import State
from tandem.daemons.supervisor.supervisor import Supervisor

ROOT = Path(__file__).resolve().parents[3]
TWO_POLICIES = [
    "env.id='tests.multiagent_envs:turn_aec'",
    "policies.alpha.agents=['a_*']",
    "policies.beta.agents=['b_*']",
]


def make(tmp_path, *overrides: str) -> Supervisor:
    config = load_config(ROOT / "examples" / "cartpole.toml", [*TWO_POLICIES, *overrides])
    return Supervisor(config, tmp_path / "config.toml", "tcp://127.0.0.1:1", tmp_path / "logs", plan_children(config))


def test_one_learner_fatal_leaves_the_run_going_and_every_learner_fatal_ends_it(tmp_path, caplog):
    sup = make(tmp_path)
    assert {"learner-alpha", "learner-beta"} <= set(sup.records)
    sup.records["learner-beta"].state = State.FATAL
    sup.records["learner-beta"].last_error = "CUDA out of memory"
    assert sup.fatal_reason() is None
    assert sup.fatal_reason() is None
    said = [r.message for r in caplog.records if "policy beta is down" in r.message]
    assert len(said) == 1 and "CUDA out of memory" in said[0]  # said once, with the cause
    sup.records["learner-alpha"].state = State.FATAL
    assert sup.fatal_reason().startswith("learner-alpha is FATAL")


def test_the_config_can_end_the_run_on_any_learner_fatal(tmp_path):
    sup = make(tmp_path, "supervisor.end_run_on_learner_fatal=true")
    sup.records["learner-beta"].state = State.FATAL
    assert sup.fatal_reason().startswith("learner-beta is FATAL")


def test_a_single_policy_run_ends_when_its_learner_is_fatal(tmp_path):
    config = load_config(ROOT / "examples" / "cartpole.toml")
    sup = Supervisor(config, tmp_path / "config.toml", "tcp://127.0.0.1:1", tmp_path / "logs", plan_children(config))
    sup.records["learner-default"].state = State.FATAL
    assert sup.fatal_reason().startswith("learner-default is FATAL")
