"""What an evaluation round reports: mean returns per agent and policy, and the env steps behind its versions."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.evaluator.rounds import episode_quotas, round_counters

BOX = gym.spaces.Box(-1.0, 1.0, (2,))
ACTIONS = gym.spaces.Discrete(2)


def test_a_single_policy_round_reports_its_mean_minimum_version_and_env_steps():
    spaces = {"default": PolicySpaces((), BOX, ACTIONS, 0)}
    counters = round_counters({None: [10.0, 20.0, 60.0]}, spaces, {"default": 7}, {"default": 12_288})
    assert counters == {"eval_return": 30.0, "eval_version": 7, "eval_return_min": 10.0, "eval_env_steps": 12_288}


def test_unknown_env_steps_are_left_out_rather_than_reported_as_zero():
    spaces = {"default": PolicySpaces((), BOX, ACTIONS, 0)}
    assert "eval_env_steps" not in round_counters({None: [1.0]}, spaces, {"default": 1}, {"default": 0})
    assert "eval_env_steps" not in round_counters({None: [1.0]}, spaces, {"default": 1})


def test_several_policies_report_each_policy_and_the_fewest_env_steps():
    spaces = {"a": PolicySpaces(("x",), BOX, ACTIONS, 0), "b": PolicySpaces(("y", "z"), BOX, ACTIONS, 0)}
    counters = round_counters(
        {"x": [1.0, 3.0], "y": [10.0], "z": [20.0]}, spaces, {"a": 4, "b": 9}, {"a": 5000, "b": 3000}
    )
    assert counters["eval_return.a"] == 2.0 and counters["eval_return.b"] == 15.0
    assert counters["eval_return"] == pytest.approx((2.0 + 10.0 + 20.0) / 3)  # the mean of the agents' means
    assert counters["eval_version"] == 4 and counters["eval_env_steps"] == 3000


def test_episode_quotas_add_up_to_the_round():
    assert list(episode_quotas(20, 3)) == [7, 7, 6]
    assert sum(episode_quotas(5, 8)) == 5
