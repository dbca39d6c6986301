"""Run configs: defaults, overrides, and an error for each kind of mistake naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.daemons.config import ConfigError, load_config, render_toml
from tandem.daemons.config.loader import config_from_dict

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_five_line_file_gets_loopback_defaults(tmp_path):
    config = load_config(write(tmp_path, '[run]\nname = "x"\n[env]\nid = "CartPole-v1"\n[actors]\ncount = 3\n'))
    assert config.actors.count == 3
    assert config.transport.host == "127.0.0.1"
    assert config.learner.device == "cpu"
    assert config.stop.eval_return is None


def test_examples_check_clean():
    for path in sorted((ROOT / "examples").glob("*.toml")):
        load_config(path)


def test_the_gpu_pong_example_keeps_the_learning_rule_of_the_cpu_one():
    # its figures are quoted as "the same learning rule on a bigger machine": only the machine may differ
    cpu = load_config(ROOT / "examples" / "pong_appo.toml")
    gpu = load_config(ROOT / "examples" / "pong_appo_gpu.toml")
    assert gpu.algorithm == cpu.algorithm and gpu.model == cpu.model and gpu.env == cpu.env
    assert gpu.learner.device == "cuda" and gpu.actors.device == "cuda" and gpu.actors.count > cpu.actors.count


def test_rendered_config_loads_back_to_the_same(tmp_path):
    config = load_config(
        ROOT / "examples" / "cartpole.toml", ["env.kwargs.sutton_barto_reward=true", "stop.env_steps=5000"]
    )
    again = load_config(write(tmp_path, render_toml(config)))
    assert again == config


@pytest.mark.parametrize(
    "text,key,words",
    [
        ("[actors]\ncont = 2\n", "actors.cont", ["did you mean 'count'", "Valid keys in [actors]: count"]),
        ("[actorz]\ncount = 2\n", "actorz", ["Valid keys in the top level: run, env"]),
        ("[actors]\ncount = '2'\n", "actors.count", ["must be an integer", "a string"]),
        ("[actors]\ncount = 2.5\n", "actors.count", ["must be an integer"]),
        ("[algorithm]\ngamma = 'high'\n", "algorithm.gamma", ["must be a number"]),
        ("[algorithm]\nprioritized = 1\n", "algorithm.prioritized", ["must be a boolean"]),
        ("[model]\nhidden_sizes = [64, 'x']\n", "model.hidden_sizes[1]", ["must be an integer"]),
        ("[env]\nkwargs = 3\n", "env.kwargs", ["must be a table"]),
        ("actors = 3\n", "actors", ["must be a table"]),
        ("[actors]\ncount = -1\n", "actors.count", [">= 0"]),
        ("[algorithm]\ngamma = 1.5\n", "algorithm.gamma", ["<= 1.0"]),
        ("[algorithm]\nlearning_rate = 0\n", "algorithm.learning_rate", ["> 0.0"]),
        ("[model]\nhidden_sizes = [64, 0]\n", "model.hidden_sizes", [">= 1"]),
        ("[run]\nlog_level = 'LOUD'\n", "run.log_level", ["not one of: DEBUG, INFO"]),
        ("[learner]\nreplay_capacity = 100\nreplay_min_size = 500\n", "learner.replay_min_size", ["never start"]),
        ("[model]\nkind = 'transformer'\n", "model.kind", ["module:callable"]),
        ("[transport]\nweights_port = 5555\nsnapshot_port = 5555\n", "transport", ["same port"]),
        # NaN passes every bound check (all comparisons are false): it once turned hang detection off.
        ("[supervisor]\nliveness_timeout_s = nan\n", "supervisor.liveness_timeout_s", ["finite number", "nan"]),
        ("[stop]\nseconds = nan\n", "stop.seconds", ["finite number"]),
        ("[algorithm]\nlearning_rate = inf\n", "algorithm.learning_rate", ["finite number", "inf"]),
        (
            "[algorithm]\nname = 'appo'\ntargets = 'per_minibatch'\nminibatch_by = 'steps'\n",
            "algorithm.minibatch_by",
            ["targets = 'per_update'"],
        ),
        (
            "[algorithm]\nname = 'impala'\nvalue_clip = 0.2\n",
            "algorithm.value_clip",
            ["targets = 'per_update'", "set it to 0"],
        ),
        ("[algorithm]\nname = 'ppo'\n", "algorithm.name", ["'ppo' is not one of: double_dqn, appo, impala"]),
        ("[algorithm]\nname = 'appo'\nepoch = 2\n", "algorithm.epoch", ["did you mean 'epochs'", "clip_ratio"]),
        ("[algorithm]\nname = 'nowhere_at_all:ALGO'\n", "algorithm.name", ["cannot import module 'nowhere_at_all'"]),
        (
            "[algorithm]\nname = 'appo'\ntargets = 'once'\n",
            "algorithm.targets",
            ["not one of: per_minibatch, per_update"],
        ),
    ],
)
def test_each_kind_of_mistake_names_its_key(tmp_path, text, key, words):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert err.value.key == key
    for word in words:
        assert word in str(err.value)


def test_per_minibatch_targets_leave_appo_with_whole_unroll_minibatches_and_no_value_clip(tmp_path):
    config = load_config(write(tmp_path, "[algorithm]\nname = 'appo'\ntargets = 'per_minibatch'\n"))
    assert (config.algorithm.minibatch_by, config.algorithm.value_clip) == ("unrolls", 0.0)
    config = load_config(write(tmp_path, "[algorithm]\nname = 'appo'\n"))
    assert (config.algorithm.targets, config.algorithm.minibatch_by, config.algorithm.value_clip) == (
        "per_update",
        "steps",
        0.2,
    )


def test_overrides(tmp_path):
    path = write(tmp_path, "[actors]\ncount = 2\n")
    config = load_config(
        path, ["actors.count=5", "env.id=Acrobot-v1", "stop.seconds=30", "env.kwargs.render_mode='rgb_array'"]
    )
    assert (config.actors.count, config.env.id, config.stop.seconds) == (5, "Acrobot-v1", 30.0)
    assert config.env.kwargs == {"render_mode": "rgb_array"}
    for bad, key in [
        ("actors.count=x", "actors.count"),
        ("actors=3", "actors"),
        ("nosuch.key=1", "nosuch"),
        ("actors.count.deep=1", "actors.count"),
    ]:
        with pytest.raises(ConfigError) as err:
            load_config(path, [bad])
        assert err.value.key == key


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[actors\ncount = 2\n"))


def test_config_from_dict_matches_schema_defaults():
    assert config_from_dict({}).algorithm.name == "double_dqn"


def test_every_mistake_is_named_at_once_in_the_order_of_the_file(tmp_path):
    # One mistake per reading took three rounds for three, and [algorithm]'s came first wherever it stood.
    path = write(
        tmp_path,
        "[run]\nnme = 'x'\n[actors]\ncount = 'two'\n[algorithm]\nname = 'double_dqn'\nlerning_rate = 0.1\n"
        "[learner]\nreplay_min_size = 500000\n",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    keys = [problem.key for problem in err.value.problems]
    assert keys == ["run.nme", "actors.count", "algorithm.lerning_rate", "learner.replay_min_size"], keys
    assert err.value.key == "run.nme" and "did you mean 'name'" in str(err.value)  # one line for a daemon's log
    assert "replay_capacity" in str(err.value.problems[-1])  # a relation between keys, checked too


def test_a_relation_made_up_by_a_default_standing_in_for_a_bad_value_is_not_reported(tmp_path):
    # learner.replay_capacity is wrong: its default (100000) must not make replay_min_size look too big
    path = write(tmp_path, "[learner]\nreplay_capacity = 'many'\nreplay_min_size = 200000\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert [problem.key for problem in err.value.problems] == ["learner.replay_capacity"]


def test_keys_that_moved_into_tables_of_their_own_are_named_with_their_new_place(tmp_path):
    # [actors] grew by union; its serve_* and Ape-X keys now live in [actors.serve] and [actors.explore]. A config
    # written before says, a line a key, where each went (not a bare "unknown key").
    old = tmp_path / "old.toml"
    old.write_text("[actors]\nmode = 'serve'\nserve_bind = 'ipc://'\nepsilon_decay_steps = 100\n")
    result = CliRunner().invoke(cli, ["config", "check", str(old)])
    assert result.exit_code == 3, result.output
    lines = [line.replace(f"{old}: ", "") for line in result.output.splitlines() if line.startswith("error:")]
    assert lines == [
        "error: actors.serve_bind: moved: write it as actors.serve.bind (key 'bind' in [actors.serve])",
        "error: actors.epsilon_decay_steps: moved: write it as actors.explore.epsilon_decay_steps "
        "(key 'epsilon_decay_steps' in [actors.explore])",
    ], result.output
    new = tmp_path / "new.toml"
    new.write_text(
        "[actors]\nmode = 'serve'\n[actors.serve]\nbind = 'ipc://'\n[actors.explore]\nepsilon_decay_steps = 100\n"
    )
    config = load_config(new)
    assert config.actors.serve.bind == "ipc://" and config.actors.explore.epsilon_decay_steps == 100
