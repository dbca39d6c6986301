"""The one daemon entry point: config errors as exit code 3, a failing daemon's error in its last heartbeat."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.supervisor.collector import HeartbeatCollector

ROOT = Path(__file__).resolve().parents[3]


def run_spec(fields: str, timeout_s: float = 60) -> subprocess.Popen:
    code = f"import sys\nfrom tandem.daemons.main import DaemonSpec, run\nsys.exit(run(DaemonSpec({fields})))\n"
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_bad_config_is_one_line_and_exit_code_3(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[actors]\ncount = 'two'\n")
    proc = run_spec(f"'actor', {str(config)!r}")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.CONFIG
    assert "actors.count" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_failing_daemon_says_why_in_its_last_heartbeat(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(f"[run]\ndir = '{tmp_path}/run'\n[env]\nid = 'NoSuchEnv-v9'\nnum_envs = 1\n")
    beats = HeartbeatCollector()
    try:
        proc = run_spec(f"'actor', {str(config)!r}, control={beats.endpoint!r}")
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            beats.pump(50)
        out, err = proc.communicate(timeout=10)
        for _ in range(10):  # its last words may still be in flight
            beats.pump(50)
    finally:
        beats.close()
    assert proc.returncode == ExitCode.SETUP and "NoSuchEnv-v9" in err  # an unknown id: a setup mistake
    last = beats.last("actor-0")
    assert last is not None and "NoSuchEnv-v9" in last.error
    assert last.stage.startswith("build_env"), "the stage it failed in is kept"
