"""Setup mistakes: named by `tandem config check` before a run, and FATAL at once (one try) in a run.

Also: an env module beside the config needs no PYTHONPATH, and a constructor that raises leaves its
traceback in the actor's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tandem.client.harness import up_command
from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.harness import ROOT, finish

CHECK_TIMEOUT_S = 120
RUN_TIMEOUT_S = 120

ENV_MODULE = '''
"""A user's env module kept beside the run's config, not installed."""
import gymnasium as gym


def make(**kwargs):
    return gym.make("CartPole-v1", **kwargs)


def broken(**kwargs):
    return build_the_broken_thing()


def build_the_broken_thing():
    raise RuntimeError("the emulator ROM is missing")
'''


def user_folder(tmp_path, env_id: str, extra: str = "") -> str:
    """A folder holding a config and the env module it names, as a user lays out a project."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "my_cartpole_envs.py").write_text(ENV_MODULE)
    config = project / "run.toml"
    config.write_text(
        textwrap.dedent(f"""\
        [run]
        name = "mine"
        dir = "{tmp_path}/run"
        [env]
        id = "{env_id}"
        num_envs = 4
        [actors]
        count = 1
        [eval]
        enabled = false
        [supervisor]
        heartbeat_interval_s = 0.2
        backoff_initial_s = 0.2
        {extra}
        """)
    )
    return str(config)


def tandem(*args: str, cwd, timeout_s: float = CHECK_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a user who never set it
    env["PYTHONPATH"] = str(ROOT)  # only the package itself (the test runs from the source tree)
    return subprocess.run(
        [sys.executable, "-m", "tandem", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s
    )


def up(config: str, cwd, *overrides: str, flags: tuple[str, ...] = ()) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    args = up_command(config, overrides, flags)
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, start_new_session=True
    )


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["env.id=CartPol-v1"], "env.id 'CartPol-v1': Environment `CartPol` doesn't exist"),
        (
            ["env.id=Pendulum-v1"],
            "algorithm.name 'double_dqn' cannot be used with this env: double_dqn needs a Discrete action space",
        ),
        (["env.id=not_a_module_anywhere:make"], "cannot import module 'not_a_module_anywhere'"),
        (["model.kind=nature_cnn"], "the Nature CNN needs a 3-D Box observation"),
        pytest.param(
            ["learner.device=cuda"],
            "learner.device: device 'cuda': CUDA is not available",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA"),
        ),
    ],
)
def test_config_check_names_a_mistake_the_daemons_would_meet_in_one_line(tmp_path, overrides, words):
    args = ["config", "check", str(ROOT / "examples" / "cartpole.toml")]
    for item in overrides:
        args += ["--set", item]
    result = tandem(*args, cwd=tmp_path)
    assert result.returncode == ExitCode.CONFIG, result.stdout + result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    skipped = tandem(*args, "--no-probe", cwd=tmp_path)
    assert skipped.returncode == 0 and "not probed" in skipped.stdout, skipped.stderr


def test_an_env_module_beside_the_config_needs_no_pythonpath(tmp_path):
    config = user_folder(tmp_path, "my_cartpole_envs:make")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check = tandem("config", "check", config, cwd=elsewhere)
    assert check.returncode == 0 and "policy 'default'" in check.stdout, check.stderr
    proc = up(config, elsewhere, "stop.env_steps=2000", "stop.seconds=90")
    out, err = finish(proc, RUN_TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["env_steps"] >= 2000, summary


@pytest.mark.parametrize("env_id", ["CartPol-v1", "Pendulum-v1"])  # a misspelled id; DQN on a Box action space
def test_tandem_up_refuses_a_config_check_mistake_before_it_starts_anything(tmp_path, env_id):
    # It started every daemon, showed `version -1` and exited 1 after 5-8 s; `config check` said it in one line.
    config = user_folder(tmp_path, env_id)
    check = tandem("config", "check", config, cwd=tmp_path)
    proc = up(config, tmp_path)
    out, err = finish(proc, RUN_TIMEOUT_S)
    assert proc.returncode == check.returncode == ExitCode.CONFIG, err[-3000:]
    refused = [line for line in err.splitlines() if line.startswith("error:")]
    assert refused == check.stderr.strip().splitlines(), (err, check.stderr)
    assert "Traceback" not in err and not (tmp_path / "run").exists()  # no run directory, no daemon
    # before the seconds of checking, a line says what is being started
    assert err.startswith("tandem up: run 'mine' in ") and "1 actor, 1 learner" in err.splitlines()[0], err


def test_a_setup_mistake_is_fatal_at_the_first_start_not_after_retries(tmp_path):
    # --no-probe: the daemons meet the mistake themselves, as one on another machine would
    config = user_folder(tmp_path, "CartPol-v1", "start_retries = 3")
    proc = up(config, tmp_path, "stop.seconds=60", flags=("--no-probe",))
    out, err = finish(proc, RUN_TIMEOUT_S)
    assert proc.returncode == ExitCode.FAILURE, err[-3000:]
    reason = json.loads(out.strip().splitlines()[-1])["reason"]
    assert "CartPol-v1" in reason and "a setup mistake: not restarted" in reason, reason
    logs = tmp_path / "run" / "logs"
    for name in ("learner-default", "actor-0"):
        starts = (logs / f"{name}.log").read_text().count(f"error: {name}: env.id 'CartPol-v1'")
        assert starts <= 1, f"{name} was started {starts} times"  # the run may end before the other starts


def test_an_env_constructor_that_raises_leaves_its_traceback_in_the_actors_log(tmp_path):
    config = user_folder(tmp_path, "my_cartpole_envs:broken", "start_retries = 1")
    proc = up(config, tmp_path, "stop.seconds=60", flags=("--no-probe",))
    out, err = finish(proc, RUN_TIMEOUT_S)
    assert proc.returncode == ExitCode.FAILURE, err[-3000:]
    logs = tmp_path / "run" / "logs"
    text = "".join(path.read_text() for path in logs.glob("*.log"))
    assert "Traceback" in text and "build_the_broken_thing" in text and "the emulator ROM is missing" in text, text
