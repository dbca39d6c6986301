"""Trained policies for people: load_policy, export/load_exported, `tandem eval` and `tandem export`, with real
torch networks, real gymnasium and PettingZoo envs and real checkpoints written by the learner's own code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tandem import PolicyError, export_policy, load_exported, load_policy
from tandem.client.cli import cli
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.checkpoints.files import save_checkpoint
from tandem.daemons.config import load_config, render_toml
from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.agents import policy_names

ROOT = Path(__file__).resolve().parents[2]


def make_run(run_dir: Path, example: str, *overrides: str) -> dict:
    """A run directory as `tandem up` leaves it: config.toml and, per policy, a checkpoint written by
    save_checkpoint from a learner algorithm whose weights were moved off their seeded start (so a policy that
    kept its initial weights would be caught). Returns policy -> the algorithm."""
    config = load_config(ROOT / "examples" / example, [f"run.dir='{run_dir}'", *overrides])
    run_dir.mkdir(parents=True)
    (run_dir / "config.toml").write_text(render_toml(config))
    algorithms = {}
    gen = torch.Generator().manual_seed(5)
    for n, name in enumerate(policy_names(config)):
        pconf = policy_config(config, name)
        spaces = probe_policy_spaces(config, name)
        algorithm = make_algorithm(pconf, spaces.observation_space, spaces.action_space, "cpu", spaces.mask_size)
        with torch.no_grad():
            net = algorithm.online if pconf.algorithm.name == "double_dqn" else algorithm.net
            for p in net.parameters():
                p.mul_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))  # keeps the scale of the init
        save_checkpoint(
            run_dir / f"learner-{name}", {"algorithm": algorithm.state_dict(), "version": 40 + n, "updates": 3}
        )
        algorithms[name] = algorithm
    return algorithms


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("dqn") / "run"
    return run, make_run(run, "cartpole.toml")["default"]


@pytest.fixture(scope="module")
def appo_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("appo") / "run"
    return run, make_run(run, "pendulum_appo.toml")["default"]


@pytest.fixture(scope="module")
def world_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("world") / "run"
    return run, make_run(run, "speaker_listener.toml", "policies.listener.algorithm={ name = 'appo' }")


def observations(space, count: int, seed: int = 0) -> np.ndarray:
    space.seed(seed)
    return np.stack([space.sample() for _ in range(count)])


# ---------------------------------------------------------------- the Python API


def test_a_dqn_policy_acts_greedily_on_one_observation_and_on_a_batch(dqn_run):
    run, algorithm = dqn_run
    policy = load_policy(run)
    assert (policy.name, policy.algorithm, policy.version) == ("default", "double_dqn", 40)
    for name, array in algorithm.weights().items():
        np.testing.assert_array_equal(policy.weights()[name], array)
    obs = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    with torch.no_grad():
        expected = algorithm.online(torch.as_tensor(obs)).argmax(1).numpy()
    np.testing.assert_array_equal(policy.act(obs), expected)
    assert len(set(expected)) == 2  # the check above could fail: both actions occur
    single = policy.act(obs[3])
    assert np.ndim(single) == 0 and single == expected[3]
    assert policy.act(list(obs[3])) == expected[3]
    with pytest.raises(ValueError, match="neither one observation"):
        policy.act(np.zeros(5))


def test_a_checkpoint_file_and_its_run_directory_give_the_same_policy(dqn_run):
    run, _ = dqn_run
    (checkpoint,) = sorted((run / "learner-default").glob("ckpt-*.pt"))
    obs = np.random.default_rng(2).normal(size=(32, 4)).astype(np.float32)
    np.testing.assert_array_equal(load_policy(checkpoint).act(obs), load_policy(run).act(obs))
    np.testing.assert_array_equal(load_policy(run / "learner-default").act(obs), load_policy(run).act(obs))
    with pytest.raises(PolicyError, match="policy 'default', not 'other'") as caught:
        load_policy(checkpoint, policy="other")
    assert caught.value.code == ExitCode.USAGE


def test_an_appo_box_policy_acts_with_the_gaussian_mean_clipped_and_samples_on_request(appo_run):
    run, algorithm = appo_run
    policy = load_policy(run, seed=3)
    space = policy.action_space
    obs = observations(policy.observation_space, 200)
    with torch.no_grad():
        mean = algorithm.net.distribution(torch.as_tensor(obs)).mode().numpy()
    greedy = policy.act(obs)
    assert greedy.shape == (200, 1) and greedy.dtype == np.float32
    np.testing.assert_allclose(greedy, np.clip(mean, space.low, space.high), rtol=1e-6)
    sampled = policy.act(obs, sample=True)
    assert np.all((sampled >= space.low) & (sampled <= space.high))
    assert np.mean(np.abs(sampled - greedy) > 1e-4) > 0.5
    assert policy.act(obs[0]).shape == (1,)


def test_each_policy_of_a_multiagent_run_loads_by_name(world_run):
    run, algorithms = world_run
    speaker, listener = load_policy(run, "speaker"), load_policy(run, "listener")
    assert (speaker.algorithm, listener.algorithm) == ("double_dqn", "appo")
    assert (speaker.version, listener.version) == (40, 41)
    obs = observations(listener.observation_space, 50)
    with torch.no_grad():
        net = algorithms["listener"].net
        expected = net.head.to_wire(net.distribution(torch.as_tensor(obs)).mode()).numpy()
    np.testing.assert_array_equal(listener.act(obs), expected)
    with pytest.raises(PolicyError, match="no policy named 'default'; the run's policies: speaker, listener") as caught:
        load_policy(run)
    assert caught.value.code == ExitCode.USAGE


@pytest.mark.parametrize("which", ["dqn", "appo", "listener"])
def test_an_export_loads_without_the_run_and_acts_like_the_checkpoint(which, dqn_run, appo_run, world_run, tmp_path):
    run, policy_name = {"dqn": (dqn_run[0], None), "appo": (appo_run[0], None), "listener": (world_run[0], "listener")}[
        which
    ]
    original = load_policy(run, policy_name)
    spec_file = export_policy(original, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["policy.json", "weights.safetensors"]
    document = json.loads(spec_file.read_text())
    assert document["algorithm"] == original.algorithm and document["policy"] == original.name
    exported = load_exported(tmp_path / "out")
    assert exported.observation_space == original.observation_space
    assert exported.action_space == original.action_space
    obs = observations(original.observation_space, 100, seed=4)
    np.testing.assert_array_equal(exported.act(obs), original.act(obs))
    assert load_policy(tmp_path / "out").version == original.version  # load_policy takes an export too


def test_importing_tandem_and_its_policy_api_loads_no_torch():
    code = (
        "import sys\nimport tandem\nfrom tandem import load_policy, load_exported, export_policy\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# ---------------------------------------------------------------- tandem eval / tandem export


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_tandem_eval_reports_mean_and_std_of_returns_and_lengths(dqn_run):
    run, _ = dqn_run
    result = invoke("eval", run, "--episodes", 4, "--seed", 10, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["episodes"] == 4 and len(report["returns"]) == 4 and len(report["lengths"]) == 4
    # CartPole pays 1 per step: the return of an episode is its length
    assert report["returns"] == [float(n) for n in report["lengths"]]
    assert report["return"]["mean"] == pytest.approx(np.mean(report["returns"]))
    assert report["return"]["std"] == pytest.approx(np.std(report["returns"]))
    again = json.loads(invoke("eval", run, "--episodes", 4, "--seed", 10, "--json").output)
    assert again["returns"] == report["returns"]  # greedy, seeded resets: the same episodes
    text = invoke("eval", run, "--episodes", 2)
    assert text.exit_code == 0 and "return" in text.output and "+-" in text.output


def test_tandem_eval_of_an_export_and_of_its_checkpoint_agree(appo_run, tmp_path):
    run, _ = appo_run
    exported = invoke("export", run, tmp_path / "pendulum")
    assert exported.exit_code == 0, exported.output
    # as the docs say to load it (it said `client.load_exported(...)`, which no user can import)
    assert f"load with `from tandem import load_exported` and load_exported('{tmp_path / 'pendulum'}')" in (
        exported.output
    ), exported.output
    from_run = json.loads(invoke("eval", run, "--episodes", 2, "--json").output)
    from_export = json.loads(invoke("eval", tmp_path / "pendulum", "--episodes", 2, "--json").output)
    assert from_run["returns"] == from_export["returns"]
    assert from_run["lengths"] == [200, 200]


def test_tandem_eval_plays_a_multiagent_world_with_every_policy(world_run):
    run, _ = world_run
    result = invoke("eval", run, "--policy", "listener", "--episodes", 2, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["policy"] == "listener"
    assert set(report["agents"]) == {"speaker_0", "listener_0"}
    assert report["return"]["mean"] == pytest.approx(report["agents"]["listener_0"]["mean"])
    # the headline's spread is over the episodes played, as the agent's own (not one mean: +- 0.00)
    assert len(report["returns"]) == 2
    assert report["return"]["std"] == pytest.approx(report["agents"]["listener_0"]["std"])
    assert report["return"]["min"] == pytest.approx(report["agents"]["listener_0"]["min"])
    unnamed = json.loads(invoke("eval", run, "--episodes", 2, "--json").output)  # every policy plays anyway
    assert unnamed["policy"] == "speaker" and unnamed["agents"] == report["agents"]


def test_tandem_eval_writes_a_video_of_each_episode(dqn_run, tmp_path):
    import cv2

    run, _ = dqn_run
    result = invoke("eval", run, "--episodes", 2, "--video", tmp_path / "video", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    for i, length in enumerate(report["lengths"]):
        capture = cv2.VideoCapture(str(tmp_path / "video" / f"episode-{i:03d}.mp4"))
        frames = 0
        while capture.read()[0]:
            frames += 1
        capture.release()
        assert frames == length + 1  # the first observation and one frame after every step


def test_tandem_eval_refuses_a_window_where_there_is_no_display_and_names_video(monkeypatch, dqn_run):
    # it played without a window and exited 0
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    result = invoke("eval", dqn_run[0], "--episodes", 1, "--render", "human")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "no display here (neither DISPLAY nor WAYLAND_DISPLAY is set)" in result.output, result.output
    assert "--video DIR" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["eval", "{tmp}/nothing-here"], ExitCode.USAGE, "does not exist"),
        (["export", "{tmp}/nothing-here", "{tmp}/out"], ExitCode.USAGE, "does not exist"),
        (["eval", "{tmp}", "--episodes", "1"], ExitCode.USAGE, "no config.toml"),
        (["eval", "{dqn}", "--policy", "nobody"], ExitCode.USAGE, "no policy named 'nobody'"),
        (["export", "{world}", "{tmp}/out"], ExitCode.USAGE, "the run's policies: speaker, listener"),
        (["eval", "{empty}"], ExitCode.FAILURE, "no readable checkpoint"),
    ],
)
def test_a_missing_run_checkpoint_or_policy_is_a_clear_error(args, code, message, dqn_run, world_run, tmp_path):
    empty = tmp_path / "empty-run"
    empty.mkdir()
    (empty / "config.toml").write_text((dqn_run[0] / "config.toml").read_text())
    names = {"tmp": tmp_path, "dqn": dqn_run[0], "world": world_run[0], "empty": empty}
    result = CliRunner().invoke(cli, [a.format(**names) for a in args])
    assert result.exit_code == int(code), result.output
    assert message in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_an_atari_policy_is_evaluated_on_preprocessed_frames_and_exported_with_its_preprocessing(tmp_path):
    run = tmp_path / "run"
    make_run(run, "pong_appo.toml", "env.max_episode_steps=25")
    policy = load_policy(run)
    assert policy.observation_space.shape == (4, 84, 84) and policy.observation_space.dtype == np.uint8
    result = invoke("eval", run, "--episodes", "1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["lengths"] == [25]  # agent steps of the preprocessed env, cut by the limit
    export_policy(policy, tmp_path / "out")
    document = json.loads((tmp_path / "out" / "policy.json").read_text())
    assert (
        document["preprocessing"]["kind"] == "atari"
        and "FrameStackObservation(4)" in document["preprocessing"]["describe"]
    )
    frames = observations(policy.observation_space, 8)
    np.testing.assert_array_equal(load_exported(tmp_path / "out").act(frames), policy.act(frames))


# ---------------------------------------------------------------- recurrent policies (model.core)


@pytest.fixture
def lstm_run(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # the example's env module, as `tandem up` finds it
    run = tmp_path / "lstm"
    yield run, make_run(run, "cartpole_lstm.toml", "model.core_size=16")["default"]
    sys.modules.pop("hidden_velocity", None)


def test_a_recurrent_policy_keeps_a_state_for_its_caller_or_takes_one_and_exports_with_its_core(lstm_run, tmp_path):
    run, _ = lstm_run
    policy = load_policy(run)
    assert policy.recurrent and policy.initial_state(3).shape == (3, 32)
    obs = observations(policy.observation_space, 40, seed=2)
    held = np.array([policy.act(o) for o in obs])
    state = policy.initial_state(1)
    explicit = np.array([policy.act(o[None], state=state)[0] for o in obs])
    np.testing.assert_array_equal(held, explicit)
    assert np.any(state)  # the state moved on with every step
    policy.reset()
    np.testing.assert_array_equal([policy.act(o) for o in obs], held)  # a reset starts the episode afresh
    # three callers side by side: each row of a batch carries its own state
    streams = np.stack([obs, obs[::-1], obs])  # [3, steps, ...]
    states = policy.initial_state(3)
    side_by_side = np.array([policy.act(streams[:, t], state=states) for t in range(len(obs))])
    np.testing.assert_array_equal(side_by_side[:, 0], held)
    np.testing.assert_array_equal(side_by_side[:, 2], held)
    exported = load_exported(Path(export_policy(policy, tmp_path / "out")).parent)
    assert exported.recurrent
    np.testing.assert_array_equal([exported.act(o) for o in obs], held)
    with pytest.raises(PolicyError, match=r"float32 \[1, 32\]"):
        policy.act(obs[0], state=np.zeros((1, 8), np.float32))


def test_a_feed_forward_policy_refuses_a_state(appo_run):
    policy = load_policy(appo_run[0])
    assert not policy.recurrent
    with pytest.raises(PolicyError, match="feed-forward"):
        policy.initial_state()
    with pytest.raises(PolicyError, match="feed-forward"):
        policy.act(observations(policy.observation_space, 1)[0], state=np.zeros((1, 4), np.float32))


def test_tandem_eval_of_a_recurrent_run_and_of_its_export_agree(lstm_run, tmp_path):
    run, _ = lstm_run
    assert invoke("export", run, tmp_path / "lstm-export").exit_code == 0
    from_run = json.loads(invoke("eval", run, "--episodes", 3, "--seed", 4, "--json").output)
    from_export = json.loads(invoke("eval", tmp_path / "lstm-export", "--episodes", 3, "--seed", 4, "--json").output)
    assert from_run["returns"] == from_export["returns"] and len(from_run["returns"]) == 3


def test_a_checkpoint_that_names_no_algorithm_says_what_its_state_dict_lacks(tmp_path):
    # A plug-in learner whose state_dict() leaves out "algorithm" (the example's did) gets told what to add.
    from tandem.client.api.policy import acting_weights

    state = {"algorithm": {"policy": {"0.weight": torch.zeros(2, 4)}}}
    with pytest.raises(PolicyError, match="names no algorithm.*config.algorithm.name under 'algorithm'"):
        acting_weights(state, "my_module:MyAlgorithm", tmp_path / "ckpt.pt")
