"""`tandem status`, `stop` and `restart` through CliRunner, against a real supervisor and an unreachable one."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from client.cli import cli
from daemons.runtime.exit_codes import ExitCode
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
