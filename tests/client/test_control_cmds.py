"""`tandem status`, `stop` and `restart` through CliRunner, against a real supervisor and an unreachable one."""

from __future__ import annotations

import json
import os
import socket

import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.client.control_cmds import pace_budget
from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.test_supervisor import Run, rows


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("command", [["status"], ["stop"], ["restart", "actor-0"]])
def test_unreachable_supervisor_says_what_to_check(command):
    result = invoke(*command, "--endpoint", f"tcp://127.0.0.1:{closed_port()}", "--timeout", "0.5")
    assert result.exit_code == ExitCode.UNREACHABLE
    assert "did not answer" in result.output and "tandem up" in result.output


def test_no_endpoint_file(tmp_path):
    result = invoke("status", "--run-dir", str(tmp_path))
    assert result.exit_code == ExitCode.UNREACHABLE and "endpoint" in result.output


def test_status_restart_stop_against_a_real_run(tmp_path):
    run = Run(tmp_path, ["actors.count=1"])
    try:
        run.wait(lambda d: all(r["state"] == "RUNNING" for r in d["processes"]), 60, "everything running")
        table = invoke("status", "--run-dir", str(tmp_path / "run"))
        assert table.exit_code == 0, table.output
        assert "actor-0" in table.output and "learner-default" in table.output and "RUNNING" in table.output
        data = json.loads(invoke("status", "--endpoint", run.endpoint, "--json").output)
        assert {r["name"] for r in data["processes"]} == {"learner-default", "actor-0"}
        assert data["policies"][0]["policy"] == "default" and data["unhealthy"] == []
        assert {"pace_per_s", "paced_s", "dropped_by_learner"} <= set(data["policies"][0])  # backpressure shown
        pid = rows(data)["actor-0"]["pid"]
        restarted = invoke("restart", "actor-0", "--endpoint", run.endpoint)
        assert restarted.exit_code == 0 and "restarting actor-0" in restarted.output
        run.wait(lambda d: rows(d)["actor-0"]["pid"] != pid and rows(d)["actor-0"]["state"] == "RUNNING", 30, "restart")
        unknown = invoke("restart", "actor-9", "--endpoint", run.endpoint)
        assert unknown.exit_code == ExitCode.FAILURE and "unknown_process" in unknown.output
        stopped = invoke("stop", "--endpoint", run.endpoint)
        assert stopped.exit_code == 0
        assert run.proc.wait(timeout=30) == ExitCode.OK
        assert "stopped by tandem stop" in (tmp_path / "up.out").read_text()
    finally:
        run.close()


def test_status_table_shows_a_long_last_error_whole():
    from rich.console import Console

    from tandem.client.control_cmds import render

    cause = "OSError: [Errno 28] No space left on device: 'runs/x/learner-default/ckpt-12.pt.tmp'"
    error = "learner-default exited with code 1 after 3 failed checkpoints; last: " + cause
    row = {
        "name": "learner-default",
        "role": "learner",
        "host": "h",
        "pid": None,
        "state": "FATAL",
        "hung": False,
        "stage": "checkpoint",
        "stage_s": 1.0,
        "uptime_s": 5.0,
        "restarts": 3,
        "heartbeat_age_s": None,
        "rss_mb": None,
        "cpu_percent": None,
        "rate_per_s": None,
        "rate_of": "updates",
        "version": 7,
        "lag": None,
        "dropped": None,
        "last_error": error,
    }
    data = {"run": "x", "processes": [row], "policies": []}
    console = Console(width=400, record=True)
    console.print(render(data))
    text = console.export_text()
    assert cause in text, text  # the table cell is cut; the cause must still be on screen


def status_of_a_busy_run() -> dict:
    def row(name, role, state, stage, rate, version, rss, restarts, recycles=0, error=""):
        return {
            "name": name,
            "role": role,
            "host": "gpu-box-17.example",
            "pid": 123456,
            "state": state,
            "hung": False,
            "stage": stage,
            "stage_s": 12.5,
            "uptime_s": 98765.4,
            "restarts": restarts,
            "recycles": recycles,
            "heartbeat_age_s": 0.4,
            "rss_mb": rss,
            "cpu_percent": 99.5,
            "rate_per_s": rate,
            "rate_of": "updates" if role == "learner" else "env_steps",
            "version": version,
            "lag": 1.25,
            "dropped": 606,
            "last_error": error,
        }

    return {
        "run": "pong-appo",
        "processes": [
            row("learner-default", "learner", "RUNNING", "running", 163.2, 123456, 2345.6, 0),
            row("actor-12", "actor", "RUNNING", "running", 18234.5, 123455, 456.7, 3, recycles=2),
            row("actor-13", "actor", "STARTING", "build_env 3/8", None, None, 120.0, 1, error="killed at its deadline"),
        ],
        "policies": [
            {
                "policy": "default",
                "state": "RUNNING",
                "version": 123456,
                "updates_per_s": 163.2,
                "replay_fill": 0.42,
                "lag": 1.25,
                "dropped_by_learner": 606,
                "dropped_by_actors": 12,
                "eval_return": 20.5,
                "last_checkpoint_age_s": 12.0,
                "learner": "learner-default",
                "time_split": {"wait": 0.05, "prepare": 0.31, "compute": 0.58, "publish": 0.04, "other": 0.02},
                "group": {"generation": 3, "members": 2, "reforms": 2, "updates_lost": 1},
            }
        ],
    }


def test_status_at_80_columns_shows_every_value_whole():
    from rich.console import Console

    from tandem.client.control_cmds import render

    console = Console(width=80, record=True)
    console.print(render(status_of_a_busy_run(), console.width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    for value in (
        "learner-default",
        "actor-12",
        "build_env 3/8",
        "RUNNING",
        "STARTING",
        "163.2u/s",
        "18.2k/s",
        "123456",
        "123455",
        "27h26m",
        "2346M",
        "3+2p",
        "20.5",
        "42%",
        "606",
        "killed at its deadline",
        "learner default time: compute 58%, prepare 31%, wait 5%, publish 4%, other 2%",
        "replica default: generation 3, 2 members, re-formed 2x, 1 updates lost",
    ):
        assert value in text, (value, text)


def test_progress_at_80_columns_with_bars_toward_each_stop_condition():
    from types import SimpleNamespace

    from tandem.client.screen import progress_lines

    figures = {
        "elapsed_s": 123.4,
        "env_steps": 1234567,
        "env_steps_per_s": 18234.5,
        "updates": 98765,
        "updates_per_s": 163.2,
        "episodes": 4321,
        "mean_return_100": -20.25,
        "eval_return": 237.5,
        "version": 98765,
        "lag_mean": 1.25,
        "batches_dropped": 606,
    }
    stop = SimpleNamespace(eval_return=475.0, mean_return=None, env_steps=None, seconds=600.0)
    lines = progress_lines(figures, stop)
    assert all(len(line) < 80 for line in lines), lines
    text = "\n".join(lines)
    for value in (
        "1.23M",
        "18.2k/s",
        "version 98765",
        "98.8k",
        "163.2/s",
        "-20.2",
        "237.5",
        "606",
        "237.5 / 475.0",
        "123.4 / 600.0",
    ):
        assert value in text, (value, text)
    eval_line = next(line for line in lines if "eval_return" in line)
    assert "#" * 10 + "-" * 10 in eval_line  # half way to 475


def test_the_pace_column_names_a_rate_a_credit_or_none():
    assert pace_budget({"pace_per_s": 1234.4, "pace_credit": 0}) == "1234/s"
    assert pace_budget({"pace_per_s": 0.0, "pace_credit": 1024}) == "1024/version"
    assert pace_budget({"pace_per_s": None, "pace_credit": None}) == "none"


def test_endpoint_files_are_newest_first_and_skip_what_cannot_be_read(tmp_path, monkeypatch):
    """`tandem status` with no --endpoint reads the newest run's endpoint; a dangling one (a run being
    removed) is skipped, not a traceback."""
    from tandem.client.control_cmds import endpoint_files

    monkeypatch.chdir(tmp_path)
    for name, mtime in (("old", 1_000_000), ("new", 2_000_000)):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "endpoint").write_text(f"ipc:///{name}")
        os.utime(tmp_path / "runs" / name / "endpoint", (mtime, mtime))
    (tmp_path / "runs" / "gone").mkdir()
    (tmp_path / "runs" / "gone" / "endpoint").symlink_to(tmp_path / "nowhere")
    assert endpoint_files() == ["runs/new/endpoint", "runs/old/endpoint"]


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait(timeout=10)
    return proc.pid


def stale_run(run_dir, pid: int) -> None:
    """What a SIGKILLed `tandem up` leaves: its endpoint file and a lock file naming its pid, held by no one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "endpoint").write_text(f"tcp://127.0.0.1:{closed_port()}\n")
    (run_dir / "supervisor.lock").write_text(f"{pid}\n")


@pytest.mark.parametrize("command", [["status"], ["stop"], ["restart", "actor-0"]])
def test_a_run_whose_supervisor_was_killed_is_said_not_running_at_once(tmp_path, command):
    # After SIGKILL of `tandem up`, status waited its 5 s timeout and blamed a slow supervisor.
    import time

    pid = dead_pid()
    stale_run(tmp_path / "run", pid)
    start = time.monotonic()
    result = invoke(*command, "--run-dir", str(tmp_path / "run"), "--timeout", "5")
    assert time.monotonic() - start < 2.0
    assert result.exit_code == ExitCode.UNREACHABLE, result.output
    assert f"is not running: its supervisor (pid {pid}) has ended" in result.output, result.output
    assert f"{tmp_path / 'run' / 'endpoint'} is left from it" in result.output and "did not answer" not in result.output


def test_status_without_a_run_dir_skips_a_killed_run_for_the_newest_live_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TANDEM_ENDPOINT", raising=False)
    stale_run(tmp_path / "runs" / "killed", dead_pid())
    os.utime(tmp_path / "runs" / "killed" / "endpoint", (2_000_000, 2_000_000))
    (tmp_path / "runs" / "older").mkdir()
    live = f"tcp://127.0.0.1:{closed_port()}"
    (tmp_path / "runs" / "older" / "endpoint").write_text(live)  # no lock file (a run of an older Tandem): asked
    os.utime(tmp_path / "runs" / "older" / "endpoint", (1_000_000, 1_000_000))
    result = invoke("status", "--timeout", "0.3")
    assert result.exit_code == ExitCode.UNREACHABLE and f"the supervisor at {live} did not answer" in result.output


def test_a_lock_held_by_a_live_process_is_a_running_run_even_when_its_pid_is_not_ours_to_see(tmp_path):
    # the lock, not the pid, is the truth: a run directory on a shared file system holds another host's pid
    import subprocess
    import sys

    stale_run(tmp_path / "run", dead_pid())
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', "
            "flush=True); time.sleep(60)",
            str(tmp_path / "run" / "supervisor.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        result = invoke("status", str(tmp_path / "run"), "--timeout", "0.3")
        assert result.exit_code == ExitCode.UNREACHABLE and "did not answer" in result.output, result.output
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_status_and_stop_take_the_run_directory_as_an_argument_as_plot_eval_and_export_do(tmp_path):
    for command in ("status", "stop"):
        result = invoke(command, str(tmp_path))
        assert result.exit_code == ExitCode.UNREACHABLE, result.output
        assert f"{tmp_path}/endpoint does not exist" in result.output  # looked there, not refused as an extra
    both = invoke("status", str(tmp_path), "--run-dir", str(tmp_path / "other"))
    assert both.exit_code == ExitCode.USAGE and "two run directories" in both.output


@pytest.mark.parametrize("command", [["status", "--watch"], ["stop"]])  # its own handling; any command's
def test_ctrl_c_exits_130_without_aborted(command):
    # docs/reference/cli.md gives Ctrl-C exit code 130; click's own handling printed "Aborted!" and exited 1
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "tandem", *command, "--endpoint", f"tcp://127.0.0.1:{closed_port()}"]
        + ["--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2.0)  # imported and waiting for its first answer
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == ExitCode.INTERRUPTED, (proc.returncode, out, err)
    assert "Aborted" not in out + err and "Traceback" not in err, out + err


def test_status_after_sigkill_of_tandem_up_says_at_once_that_the_run_is_not_running(tmp_path):
    import signal
    import time

    run = Run(tmp_path, ["actors.count=1", "eval.enabled=false"])
    try:
        run.wait(lambda d: all(r["state"] == "RUNNING" for r in d["processes"]), 60, "everything running")
        supervisor = run.proc.pid
        os.kill(supervisor, signal.SIGKILL)
        run.proc.wait(timeout=10)
        assert (tmp_path / "run" / "endpoint").exists()  # left behind: nothing cleaned up
        start = time.monotonic()
        result = invoke("status", str(tmp_path / "run"))
        assert time.monotonic() - start < 2.0 and result.exit_code == ExitCode.UNREACHABLE, result.output
        assert f"is not running: its supervisor (pid {supervisor}) has ended" in result.output, result.output
    finally:
        run.close()


def test_the_unhealthy_line_says_why_each_process_is_there():
    from tandem.client.control_cmds import unhealthy_line

    data = {
        "unhealthy": ["learner-default", "actor-1"],
        "unhealthy_reasons": {"learner-default": "disk write failed: No space left on device"},
    }
    assert unhealthy_line(data) == "unhealthy: learner-default (disk write failed: No space left on device), actor-1"
    assert unhealthy_line({"unhealthy": ["actor-0"]}) == "unhealthy: actor-0"
