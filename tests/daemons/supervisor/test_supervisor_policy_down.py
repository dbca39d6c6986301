"""One policy's learner FATAL in a multi-policy run: the others train on unless the config says to end the run."""

from __future__ import annotations

from tandem.daemons.supervisor.states import State
from tandem.daemons.supervisor.supervisor import Supervisor
from tests.daemons.supervisor.builders import supervisor

TWO_POLICIES = [
    "env.id='tests.multiagent_envs:turn_aec'",
    "policies.alpha.agents=['a_*']",
    "policies.beta.agents=['b_*']",
]


def make(tmp_path, *overrides: str) -> Supervisor:
    return supervisor(tmp_path, *TWO_POLICIES, *overrides)


def fatal(sup: Supervisor, name: str) -> None:
    sup.processes[name].record.state = State.FATAL


def test_one_learner_fatal_leaves_the_run_going_and_every_learner_fatal_ends_it(tmp_path, caplog):
    sup = make(tmp_path)
    assert {"learner-alpha", "learner-beta"} <= set(sup.processes)
    fatal(sup, "learner-beta")
    sup.processes["learner-beta"].record.last_error = "CUDA out of memory"
    assert sup.fatal_reason() is None
    assert sup.fatal_reason() is None
    said = [r.message for r in caplog.records if "policy beta is down" in r.message]
    assert len(said) == 1 and "CUDA out of memory" in said[0]  # said once, with the cause
    fatal(sup, "learner-alpha")
    assert sup.fatal_reason().startswith("learner-alpha is FATAL")


def test_the_config_can_end_the_run_on_any_learner_fatal(tmp_path):
    sup = make(tmp_path, "supervisor.end_run_on_learner_fatal=true")
    fatal(sup, "learner-beta")
    assert sup.fatal_reason().startswith("learner-beta is FATAL")


def test_a_single_policy_run_ends_when_its_learner_is_fatal(tmp_path):
    sup = supervisor(tmp_path)
    fatal(sup, "learner-default")
    assert sup.fatal_reason().startswith("learner-default is FATAL")
