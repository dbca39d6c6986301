"""deploy/tmux/tandem-tmux starts a short CartPole run in a private tmux server, and stop leaves no process behind."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tandem.daemons.config import load_config, render_toml
from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.protocol import sockets
from tests.system.harness import ROOT

LAUNCHER = ROOT / "deploy" / "tmux" / "tandem-tmux"
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed on this machine")


def tandem_command() -> str:
    tandem = Path(sys.executable).parent / "tandem"
    return str(tandem) if tandem.exists() else f"{sys.executable} -m tandem"


def ours(tmp_path: Path) -> list[psutil.Process]:
    """Every process whose command line names this test's directory (config, tmux socket)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(tmp_path) in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_running(endpoint: str, names: list[str], timeout_s: float) -> dict:
    ctx = sockets.new_context()
    channel = ControlChannel(ctx, endpoint)
    deadline, rows = time.monotonic() + timeout_s, {}
    try:
        while time.monotonic() < deadline:
            try:
                rows = {r["name"]: r for r in channel.request("status", timeout_s=5).data["processes"]}
            except ControlTimeout:
                continue
            if all(rows.get(n, {}).get("stage") == "running" for n in names):
                return rows
            time.sleep(0.3)
    finally:
        channel.close()
        sockets.close_context(ctx, 0)
    raise AssertionError(f"timed out waiting for {names} to run: {rows}")


def test_tmux_launcher_starts_and_stops_a_run(tmp_path):
    # Every port 0, as a user's config has them: the supervisor picks its control port and writes it to
    # RUN_DIR/endpoint, the learner binds free ports and registers them, the actor looks them up.
    config = tmp_path / "config.toml"
    config.write_text(
        render_toml(
            load_config(
                ROOT / "examples" / "cartpole.toml",
                [
                    f"run.dir='{tmp_path}/run'",
                    "actors.count=1",
                    "env.num_envs=2",
                    "eval.enabled=false",
                    "supervisor.heartbeat_interval_s=0.2",
                ],
            )
        )
    )
    sock = tmp_path / "tmux.sock"
    base = [sys.executable, str(LAUNCHER), "-S", str(sock), "--tandem", tandem_command()]
    session = "tandem-test"
    try:
        started = subprocess.run(
            [*base, "start", str(config), session], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert started.returncode == 0, started.stderr
        # the hints name the tmux server the session is in (they lacked it: `tmux attach` found no session)
        assert f"tmux -S {sock} attach -t {session}" in started.stdout, started.stdout
        assert f"tandem-tmux -S {sock} stop {session}" in started.stdout, started.stdout
        windows = subprocess.run(
            ["tmux", "-S", str(sock), "list-panes", "-s", "-t", session, "-F", "#{window_name} #{pane_pid}"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        pids = dict(line.split() for line in windows.splitlines())
        assert set(pids) == {"supervisor", "learner-default", "actor-0", "status"}, windows
        server = int(
            subprocess.run(
                ["tmux", "-S", str(sock), "display-message", "-p", "#{pid}"], capture_output=True, text=True, timeout=10
            ).stdout
        )

        endpoint = (tmp_path / "run" / "endpoint").read_text().strip()
        rows = wait_running(endpoint, ["learner-default", "actor-0"], 90)
        assert rows["actor-0"]["pid"] == int(pids["actor-0"])  # the window runs the daemon itself (exec)
        status = subprocess.run(
            [*tandem_command().split(), "status", "--json", "--endpoint", endpoint],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert {r["name"]: r["stage"] for r in json.loads(status.stdout)["processes"]} == {
            "learner-default": "running",
            "actor-0": "running",
        }

        debug = "".join(
            subprocess.run(
                ["tmux", "-S", str(sock), "capture-pane", "-p", "-t", f"{session}:{w}"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
            for w in ("learner-default", "actor-0")
        )
        stopped = subprocess.run(
            [*base, "stop", session, "--timeout", "20"], capture_output=True, text=True, timeout=90
        )
        assert stopped.returncode == 0 and "SIGKILL" not in stopped.stdout, stopped.stdout + stopped.stderr + debug
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (ours(tmp_path) or psutil.pid_exists(server)):
            time.sleep(0.1)
        assert not ours(tmp_path) and not psutil.pid_exists(server)
        assert list((tmp_path / "run" / "learner-default").glob("ckpt-*.pt")), "the learner checkpoints on stop"
        assert not (tmp_path / "run" / "endpoint").exists()
        # each daemon's output outlives the session, in the run directory as under `tandem up`
        logs = tmp_path / "run" / "logs"
        assert {p.name for p in logs.iterdir()} >= {"supervisor.log", "learner-default.log", "actor-0.log"}
        assert "learner-default" in (logs / "learner-default.log").read_text()
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, timeout=10)
        for proc in ours(tmp_path):
            proc.kill()


def test_tmux_launcher_reports_a_bad_config_in_one_line(tmp_path):
    sock = tmp_path / "tmux.sock"
    result = subprocess.run(
        [
            sys.executable,
            str(LAUNCHER),
            "-S",
            str(sock),
            "--tandem",
            tandem_command(),
            "start",
            str(tmp_path / "missing.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 1 and result.stderr.startswith("error:") and "Traceback" not in result.stderr
    assert not sock.exists()  # no tmux server was started


def test_tmux_launcher_finds_tandem_beside_its_python_without_path(tmp_path):
    if not (Path(sys.executable).parent / "tandem").exists():
        pytest.skip("no tandem script beside this Python (not a venv install)")
    sock = tmp_path / "tmux.sock"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # a shell where the venv is not activated
    result = subprocess.run(
        [sys.executable, str(LAUNCHER), "-S", str(sock), "start", str(tmp_path / "missing.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    # tandem itself ran (it is the one saying the file is missing), rather than "could not run tandem"
    assert result.returncode == 1 and "missing.toml" in result.stderr, result.stderr
    assert "could not run" not in result.stderr and "cannot find tandem" not in result.stderr, result.stderr


def test_the_attach_and_stop_hints_name_the_tmux_server_they_were_given():
    import argparse
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("tandem_tmux", str(LAUNCHER))
    launcher = importlib.util.module_from_spec(importlib.util.spec_from_loader("tandem_tmux", loader))
    loader.exec_module(launcher)
    named = argparse.Namespace(socket_name="other", socket_path=None)
    assert launcher.attach_hint(named, "tandem-x") == "tmux -L other attach -t tandem-x"
    plain = argparse.Namespace(socket_name=None, socket_path=None)
    assert launcher.attach_hint(plain, "tandem-x") == "tmux attach -t tandem-x"
