"""`--checkpoint latest|best|solved` and load_policy(checkpoint=...): the evaluator's kept files load by name, the
default stays the learner's newest, and a name with no file is a clear error that lists what there is."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tandem import PolicyError, load_exported, load_policy
from tandem.client.api.checkpoint_choice import available, pick
from tandem.client.cli import cli
from tandem.client.policy_cmds import checkpoint_option
from tandem.daemons.evaluator.kept import CHOICES, KeptCheckpoints
from tandem.daemons.runtime.exit_codes import ExitCode
from tests.client.test_policy import make_run


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    """A DQN run with a learner checkpoint (version 40) and an evaluator's best.pt (version 33, other weights)."""
    run = tmp_path_factory.mktemp("kept") / "run"
    algorithm = make_run(run, "cartpole.toml")["default"]
    best = {name: array * 2.0 if array.dtype.kind == "f" else array for name, array in algorithm.weights().items()}
    kept = KeptCheckpoints({"default": run / "learner-default"}, {"default": "double_dqn"}, target=475.0)
    kept.after_round({"eval_return": 321.5}, {"default": 33}, 7, 20, lambda policy: best)
    return run, algorithm.weights(), best


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_the_default_is_the_learners_newest_and_best_is_the_evaluators_file(kept_run):
    run, latest, best = kept_run
    default, named = load_policy(run), load_policy(run, checkpoint="latest")
    assert default.version == named.version == 40 and default.spec.evaluation is None
    same(default.weights(), latest)
    chosen = load_policy(run, checkpoint="best")
    assert chosen.version == 33 and chosen.spec.source == str(run / "learner-default" / "best.pt")
    assert chosen.spec.evaluation["return"] == 321.5 and chosen.spec.evaluation["round"] == 7
    same(chosen.weights(), best)
    same(load_policy(run / "learner-default" / "best.pt").weights(), best)  # the file itself, like any checkpoint


def test_picking_by_name_and_what_a_directory_holds(kept_run):
    directory = kept_run[0] / "learner-default"
    assert available(directory) == {"latest": "ckpt-000000000040.pt", "best": "best.pt"}
    assert pick(directory, None) == pick(directory, "latest") == directory
    assert pick(directory, "best") == directory / "best.pt"
    with pytest.raises(PolicyError) as missing:
        pick(directory, "solved")
    assert missing.value.code == ExitCode.USAGE
    assert "no 'solved' checkpoint" in str(missing.value)
    assert "checkpoints there: latest (ckpt-000000000040.pt), best (best.pt)" in str(missing.value)
    with pytest.raises(PolicyError, match="unknown checkpoint 'worst': choose one of latest, best, solved"):
        pick(directory, "worst")
    assert available(directory.parent / "learner-nobody") == {}


def test_a_named_choice_needs_a_run_directory_not_a_file(kept_run):
    run = kept_run[0]
    with pytest.raises(PolicyError, match="is a checkpoint file; name the run directory") as refused:
        load_policy(run / "learner-default" / "ckpt-000000000040.pt", checkpoint="best")
    assert refused.value.code == ExitCode.USAGE


def test_tandem_eval_and_export_take_the_checkpoint_by_name(kept_run, tmp_path):
    run = kept_run[0]
    result = invoke("eval", run, "--checkpoint", "best", "--episodes", 2, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["version"] == 33 and report["evaluation"]["return"] == 321.5
    assert report["checkpoint"].endswith("best.pt")
    text = invoke("eval", run, "--checkpoint", "best", "--episodes", 1)
    assert text.exit_code == 0 and "kept as best by the evaluator: return 321.50 over 20 episodes" in text.output
    exported = invoke("export", run, tmp_path / "best", "--checkpoint", "best")
    assert exported.exit_code == 0, exported.output
    assert load_exported(tmp_path / "best").version == 33
    assert json.loads(invoke("eval", run, "--episodes", 1, "--json").output)["version"] == 40  # the default


def test_a_missing_named_checkpoint_is_a_usage_error_listing_those_there(kept_run):
    result = invoke("eval", kept_run[0], "--checkpoint", "solved", "--episodes", 1)
    assert result.exit_code == int(ExitCode.USAGE), result.output
    assert (
        "no 'solved' checkpoint" in result.output and "latest (ckpt-000000000040.pt), best (best.pt)" in result.output
    )
    assert "Traceback" not in result.output
    bad = invoke("eval", kept_run[0], "--checkpoint", "worst")
    assert bad.exit_code == int(ExitCode.USAGE) and "latest" in bad.output


def test_a_run_with_only_kept_files_says_so(kept_run, tmp_path):
    run = tmp_path / "remote-learner-run"
    (run / "learner-default").mkdir(parents=True)
    (run / "config.toml").write_text((kept_run[0] / "config.toml").read_text())
    (run / "learner-default" / "best.pt").write_bytes((kept_run[0] / "learner-default" / "best.pt").read_bytes())
    with pytest.raises(PolicyError, match=r"the evaluator kept: best; pick one with --checkpoint"):
        load_policy(run)
    assert load_policy(run, checkpoint="best").version == 33


def test_the_cli_offers_exactly_the_kept_choices():
    @checkpoint_option
    def command(checkpoint):
        pass

    assert tuple(command.__click_params__[0].type.choices) == CHOICES


def test_every_policy_of_a_world_plays_its_own_kept_checkpoint(tmp_path):
    run = tmp_path / "run"
    algorithms = make_run(run, "speaker_listener.toml", "policies.listener.algorithm={ name = 'appo' }")
    kept = KeptCheckpoints(
        {p: run / f"learner-{p}" for p in algorithms}, {"speaker": "double_dqn", "listener": "appo"}, target=None
    )
    versions = {"speaker": 11, "listener": 12}
    kept.after_round(
        {"eval_return": -9.0, "eval_return.speaker": -9.0, "eval_return.listener": -9.0},
        versions,
        1,
        4,
        lambda policy: algorithms[policy].weights(),
    )
    for file in (run / "learner-speaker").glob("ckpt-*.pt"):
        file.unlink()  # so the speaker can only play its best.pt
    assert invoke("eval", run, "--policy", "listener", "--episodes", 1).exit_code == int(ExitCode.FAILURE)
    for source in (run, run / "learner-listener" / "best.pt"):  # a kept file as the source names its kind
        args = ["--checkpoint", "best"] if source == run else []
        result = invoke("eval", source, "--policy", "listener", "--episodes", 1, "--json", *args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["version"] == 12
    assert load_policy(run, "speaker", checkpoint="best").version == 11
