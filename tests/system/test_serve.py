"""`tandem serve`: a trained policy behind an action server, no learner: games play it, bad steps are refused by
name, the status line shows them, and Ctrl-C ends it cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from tandem.client.game import Agent, AgentError, find_endpoint
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.checkpoints.files import save_checkpoint
from tandem.daemons.config import load_config, render_toml
from tandem.daemons.envs.probe import probe_policy_spaces
from tests.system.harness import ROOT


def saved_run(tmp_path):
    """A run directory holding one checkpoint of examples/cartpole_appo.toml's network (fresh weights)."""
    run = tmp_path / "run"
    run.mkdir()
    config = load_config(ROOT / "examples" / "cartpole_appo.toml", [f"run.dir='{run}'"])
    (run / "config.toml").write_text(render_toml(config))
    spaces = probe_policy_spaces(config)
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    with torch.no_grad():
        for p in algorithm.net.parameters():
            p.mul_(5.0)
    save_checkpoint(run / "learner-default", {"algorithm": algorithm.state_dict(), "version": 7, "updates": 1})
    return run


@pytest.mark.timeout(120)
def test_a_served_policy_plays_games_refuses_bad_steps_and_stops_on_ctrl_c(tmp_path):
    run = saved_run(tmp_path)
    serve = subprocess.Popen(
        [sys.executable, "-m", "tandem", "serve", str(run), "--dir", str(tmp_path / "serve")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        endpoint = find_endpoint(tmp_path / "serve", timeout_s=60)
        with Agent(endpoint, game="test", timeout_s=10) as agent:
            assert agent.spaces.obs_shape == (4,) and agent.spaces.action_kind == "discrete"
            actions = {agent.act(np.array([0.1 * i, 0.0, 0.05 * i, 0.0], np.float32), 1.0) for i in range(-5, 6)}
            assert actions <= {0, 1} and agent.version == 7
            with pytest.raises(AgentError) as refused:
                agent.act(np.zeros(5, np.float32))  # another shape: refused by name, the session goes on
            assert refused.value.code == "bad_obs" and not refused.value.fatal
            assert agent.act(np.zeros(4, np.float32)) in (0, 1)
        time.sleep(5.5)  # one status line after the game (every 5 s)
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=30)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.communicate(timeout=10)
    assert serve.returncode in (0, 130), err[-2000:]
    lines = [line for line in out.splitlines() if line.startswith("serving 'default' version 7 at ")]
    assert lines and any("1 refused" in line for line in lines), out
    assert not (tmp_path / "serve" / "games" / "actor-0.endpoint").exists()  # gone with the server
