"""A learner started by hand joins a running supervisor; its actors find it through the registry."""

from __future__ import annotations

import subprocess
import sys

from tandem.client.harness import up_command
from tests.system.harness import ROOT
from tests.system.test_supervisor import Run, rows


def test_hand_started_learner_joins_and_actors_find_it(tmp_path, procs):
    run = Run(tmp_path, ["actors.count=1", "learner.remote=true"])
    try:
        data = run.wait(lambda d: rows(d)["actor-0"]["stage"] == "connect", 60, "the actor waiting for a learner")
        assert "learner-default" not in rows(data)
        config = str(tmp_path / "run" / "config.toml")
        procs.start("learner", "learner", config, "--join", run.endpoint, "--bind", "tcp://127.0.0.1:*")
        data = run.wait(
            lambda d: (
                rows(d).get("learner-default", {}).get("state") == "REMOTE"
                and rows(d)["actor-0"]["state"] == "RUNNING"
                and (rows(d)["actor-0"]["version"] or -1) >= 0
            ),
            60,
            "the actor acting with the joined learner's weights",
        )
        policy = data["policies"][0]
        assert policy["policy"] == "default" and policy["state"] == "REMOTE" and policy["insecure"] is False
        run.wait(
            lambda d: (rows(d)["learner-default"]["counters"].get("transitions_inserted") or 0) > 0,
            30,
            "transitions reaching the joined learner",
        )
    finally:
        run.close()


def test_binding_beyond_loopback_needs_insecure(tmp_path):
    config = ROOT / "examples" / "cartpole.toml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tandem",
            "learner",
            str(config),
            "--bind",
            "tcp://0.0.0.0:*",
            "--set",
            f"run.dir='{tmp_path}/run'",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 1
    assert "security.key_dir" in result.stderr and "--insecure" in result.stderr and "Traceback" not in result.stderr


def test_up_refuses_a_non_loopback_host_without_insecure(tmp_path):
    result = subprocess.run(
        up_command(
            ROOT / "examples" / "cartpole.toml", ["transport.host=0.0.0.0", f"run.dir='{tmp_path}/run'"], as_json=False
        ),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "security.key_dir" in result.stderr and "--insecure" in result.stderr
