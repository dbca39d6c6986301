"""The algorithm interface: built-in algorithms and a plug-in found by algorithm.name, their own config sections,
and the Feed protocol that both learner feeds satisfy."""

from __future__ import annotations

import dataclasses
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.daemons.algorithms import algorithm_of, make_algorithm, make_feed, make_policy
from tandem.daemons.algorithms.base import Feed
from tandem.daemons.algorithms.registry import built_in, default_algorithm, find_algorithm
from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.config import ConfigError, load_config, render_toml
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.evaluator.kept import acting_network
from tandem.daemons.feeds.replay_feed import ReplayFeed
from tandem.daemons.feeds.unroll_feed import UnrollFeed
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.schema import AlgorithmSection, ReplaySection, RunConfig
from tandem.daemons.settings.setup_errors import SetupError
from tests.daemons.plugin_algorithm import PATH, WRAPPED, WrappedSection

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(2)


def test_the_built_in_algorithms_register_through_their_specs():
    specs = built_in()
    assert list(specs) == ["double_dqn", "appo", "impala", "sac"] and default_algorithm() is specs["double_dqn"]
    for name, spec in specs.items():
        assert isinstance(spec, AlgorithmSpec) and spec.name == name and find_algorithm(name) is spec
        assert issubclass(spec.section, AlgorithmSection) and spec.section().name == name
    assert type(RunConfig().algorithm) is specs["double_dqn"].section  # a config that names none
    assert [s.on_policy for s in specs.values()] == [False, True, True, False]
    assert [s.acting_network for s in specs.values()] == ["online", "net", "net", "policy"]


def test_each_algorithm_reads_only_its_own_keys_with_its_own_defaults():
    dqn, appo, impala = (config_from_dict({"algorithm": {"name": n}}) for n in ("double_dqn", "appo", "impala"))
    assert dqn.algorithm.n_step == 3 and not hasattr(dqn.algorithm, "epochs")
    assert (appo.algorithm.learning_rate, appo.algorithm.max_grad_norm, appo.algorithm.clip_ratio) == (3e-4, 0.5, 0.2)
    assert not hasattr(appo.algorithm, "n_step") and not hasattr(impala.algorithm, "clip_ratio")
    assert (impala.algorithm.max_grad_norm, impala.algorithm.vtrace_lambda, impala.learner.max_lag) == (40.0, 1.0, 32)
    assert dqn.learner.max_lag == 1000


def test_an_unknown_algorithm_names_the_known_ones(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[algorithm]\nname = 'ppo'\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == "algorithm.name"
    assert "'ppo' is not one of: double_dqn, appo, impala, sac (or 'package.module:NAME'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"policies": {"a": {"algorithm": {"name": "sarsa"}}}})
    assert err.value.key == "policies.a.algorithm.name"


def test_a_key_of_another_algorithm_is_ignored_with_a_warning_naming_it_and_its_algorithm(caplog):
    config = config_from_dict({"algorithm": {"name": "appo", "n_step": 5, "epochs": 3}})
    assert config.algorithm.epochs == 3 and not hasattr(config.algorithm, "n_step")
    assert "algorithm: ignoring keys of other algorithms than 'appo': n_step (double_dqn and sac)" in caplog.text
    config = config_from_dict({"algorithm": {"name": "impala", "clip_ratio": 0.1}})
    assert "clip_ratio (appo)" in caplog.text and not hasattr(config.algorithm, "clip_ratio")


def test_a_key_of_no_algorithm_is_an_error_listing_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        config_from_dict({"algorithm": {"name": "appo", "epoch": 3}})
    assert err.value.key == "algorithm.epoch"
    assert "did you mean 'epochs'" in str(err.value) and "clip_ratio" in str(err.value)


def test_a_config_written_with_every_algorithms_keys_still_loads_with_the_same_values(tmp_path, caplog):
    # run directories and exports written before each algorithm had its own section hold all of them
    every = {}
    for spec in built_in().values():  # as TOML holds them: an unset (None) key is not written
        every.update({k: v for k, v in dataclasses.asdict(spec.section()).items() if v is not None})
    for name in built_in():
        config = config_from_dict({"algorithm": {**every, "name": name, "gamma": 0.9}})
        assert config.algorithm.name == name and config.algorithm.gamma == 0.9
        assert set(dataclasses.asdict(config.algorithm)) == {
            f.name for f in dataclasses.fields(built_in()[name].section)
        }


def test_config_show_renders_the_chosen_algorithms_keys_with_their_docs(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[algorithm]\nname = 'appo'\n")
    shown = CliRunner().invoke(cli, ["config", "show", str(path)]).output
    assert "# [algorithm] of appo: PPO's clipped objective on V-trace targets." in shown
    assert "# PPO clip range of the ratio target/behaviour policy.\nclip_ratio = 0.2" in shown
    assert "n_step" not in shown
    again = tmp_path / "again.toml"
    again.write_text(shown)
    assert load_config(again) == load_config(path)


def test_a_plugin_algorithm_is_loaded_by_its_path_and_runs_through_the_same_factories(tmp_path):
    config = config_from_dict({"algorithm": {"name": PATH, "warmup_updates": 3, "batch_size": 64}})
    assert type(config.algorithm) is WrappedSection and algorithm_of(config) is WRAPPED
    assert (config.algorithm.warmup_updates, config.algorithm.epochs, config.algorithm.clip_ratio) == (3, 2, 0.2)
    assert config.learner.max_lag == 32  # APPO's defaults of other sections come with it
    assert "# Updates before this algorithm's own rule starts (a key only it has).\nwarmup_updates = 3" in render_toml(
        config
    )
    learner = make_algorithm(config, OBS, ACTIONS, "cpu")
    policy = make_policy(config, OBS, ACTIONS, seed=1)
    policy.load_weights(learner.weights())
    actions, extras = policy.explore(np.zeros((3, 4), np.float32), np.zeros(3))
    assert actions.shape == (3,) and "behaviour_logp" in extras
    assert learner.state_dict()["algorithm"] == PATH  # what a checkpoint records, and load_policy checks
    assert acting_network(PATH) == "net" and isinstance(make_feed(config, OBS, ACTIONS), UnrollFeed)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"algorithm": {"name": PATH, "warmup_updates": 101}})
    assert err.value.key == "algorithm.warmup_updates"  # its own relation checks run too
    with pytest.raises(ValueError, match="cannot be used with this env"):
        make_algorithm(config, OBS, gym.spaces.Text(5), "cpu")


def test_a_policy_may_run_a_plugin_algorithm_from_its_own_defaults():
    config = config_from_dict(
        {"policies": {"a": {"agents": ["a"]}, "b": {"agents": ["b"], "algorithm": {"name": PATH}}}}
    )
    from tandem.daemons.config.policies import policy_config

    assert type(policy_config(config, "a").algorithm).__name__ == "DQNSection"
    b = policy_config(config, "b")
    assert type(b.algorithm) is WrappedSection and b.algorithm.epochs == 2 and b.learner.max_lag == 32


@pytest.mark.parametrize(
    "name,words",
    [
        ("no_such_module_for_tandem:ALGO", ["cannot import module 'no_such_module_for_tandem'", "PYTHONPATH"]),
        ("tests.daemons.plugin_algorithm:MISSING", ["has no attribute 'MISSING'"]),
        ("tests.daemons.plugin_algorithm:NOT_A_SPEC", ["is a int, not an AlgorithmSpec"]),
        ("tests.daemons.plugin_algorithm:", ["expected 'package.module:NAME'"]),
    ],
)
def test_a_plugin_that_does_not_load_is_one_line_from_config_check(tmp_path, name, words):
    with pytest.raises(SetupError):
        find_algorithm(name)
    path = tmp_path / "run.toml"
    path.write_text(f"[algorithm]\nname = '{name}'\n")
    result = CliRunner().invoke(cli, ["config", "check", str(path), "--no-probe"])
    assert result.exit_code == ExitCode.CONFIG and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: {path}: algorithm.name: '{name}'")
    for word in words:
        assert word in line


def test_a_plugin_module_beside_the_config_file_is_found(tmp_path, monkeypatch):
    (tmp_path / "beside_algo.py").write_text(
        textwrap.dedent(
            """
            import dataclasses
            from tandem.daemons.algorithms.dqn.spec import DOUBLE_DQN
            MINE = dataclasses.replace(DOUBLE_DQN, name="mine")
            """
        )
    )
    path = tmp_path / "run.toml"
    path.write_text("[algorithm]\nname = 'beside_algo:MINE'\nn_step = 2\n")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder the loader adds goes with the test
    monkeypatch.delitem(sys.modules, "beside_algo", raising=False)
    config = load_config(path)
    assert algorithm_of(config).name == "mine" and config.algorithm.n_step == 2
    sys.modules.pop("beside_algo", None)


def test_both_feeds_are_feeds_and_the_learner_needs_nothing_else():
    replay = ReplayFeed(RunConfig(), OBS, ACTIONS)
    unrolls = UnrollFeed(batch_size=64, max_lag=10)
    assert isinstance(replay, Feed) and isinstance(unrolls, Feed)
    assert (replay.can_prefetch, replay.credit_pacing, unrolls.can_prefetch, unrolls.credit_pacing) == (
        True,
        False,
        False,
        True,
    )
    assert replay.consumed_per_update == 128 / 4.0 and unrolls.consumed_per_update == 64.0

    class Partial:  # everything but one member
        def __getattr__(self, name):
            if name == "lag_of":
                raise AttributeError(name)
            return getattr(unrolls, name)

    assert not isinstance(Partial(), Feed)
    for name in ("double_dqn", "appo"):
        assert isinstance(make_feed(config_from_dict({"algorithm": {"name": name}}), OBS, ACTIONS), Feed)


def test_the_replay_feed_takes_only_a_section_that_declares_its_keys():
    # ReplayFeed reads n_step and the priority keys: a section without them is refused by name, not probed.
    appo = config_from_dict({"algorithm": {"name": "appo"}})
    with pytest.raises(TypeError, match="must subclass ReplaySection"):
        ReplayFeed(appo, OBS, ACTIONS)
    assert isinstance(RunConfig().algorithm, ReplaySection)  # the default algorithm's section declares them


def test_uniform_actions_while_untrained_are_declared_by_the_section():
    assert not RunConfig().algorithm.uniform_until_trained()
    sac = config_from_dict({"algorithm": {"name": "sac"}})
    assert sac.algorithm.uniform_until_trained()
    off = config_from_dict({"algorithm": {"name": "sac", "uniform_warmup": False}})
    assert not off.algorithm.uniform_until_trained()
