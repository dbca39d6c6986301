"""`tandem chaos --quick`, a few drills per test, each against real `tandem up` runs; every drill must pass."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tandem.client.harness import kill_session
from tests.system.harness import ROOT


def chaos(tmp_path, only: str, timeout_s: float) -> dict:
    """Run `tandem chaos --quick --only ONLY` (in its own session, killed whole if it overruns); its document."""
    out = tmp_path / "chaos.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tandem", "chaos", "--quick", "--only", only, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        stdout, stderr = proc.communicate(timeout=30)
        pytest.fail(f"tandem chaos --only {only} ran past {timeout_s} s:\n{stderr[-3000:]}")
    record = json.loads(out.read_text())
    assert json.loads(stdout) == record
    failed = {
        n: (r.get("failed"), r.get("error"), r["figures"]) for n, r in record["drills"].items() if r["ok"] is False
    }
    assert not failed, failed
    assert proc.returncode == 0, stderr[-3000:]
    assert set(record["drills"]) == set(only.split(","))
    return {n: r["figures"] for n, r in record["drills"].items()}


def test_kills_stops_bad_batches_and_sigterm_in_one_run(tmp_path):
    f = chaos(tmp_path, "actor_kill,bad_batches,sigstop_actor,sigstop_learner,learner_kill,sigterm", 240)
    assert f["actor_kill"]["kills"] == 2 and f["actor_kill"]["corrupt_batches"] == 0
    assert f["actor_kill"]["updates_after"] > f["actor_kill"]["updates_before"]
    bad = f["bad_batches"]
    assert bad["learner_restarts"] == 0 and sum(bad["sent"].values()) > 0
    assert bad["counted_by_reason"] == bad["expected_by_reason"] and bad["counted_by_reason"]["values"] > 0
    assert bad["counted_by_reason"]["entities"] > 0  # an entity batch whose rows do not add up (PROTOCOL.md 2.1.7)
    assert f["learner_kill"]["actor_pid_changes"] == 0 and f["learner_kill"]["version_regressions"] == 0
    assert f["sigstop_learner"]["detect_s"] >= 3.5  # liveness_timeout_s 4 of the run, not sooner
    assert f["sigterm"]["exit_code"] == 130 and f["sigterm"]["orphans"] == 0 and f["sigterm"]["checkpoint_written"]


def test_hanging_env_constructors_a_hang_in_step_and_sigint(tmp_path):
    f = chaos(tmp_path, "hang_build_once,hang_build_always,hang_step,sigint", 200)
    assert f["hang_build_once"]["others_restarts"] == 0 and f["hang_build_once"]["state"] == "RUNNING"
    assert f["hang_build_always"]["state"] == "FATAL" and "deadline" in f["hang_build_always"]["last_error"]
    assert f["hang_step"]["detect_s"] >= 5.5 and "hung" in f["hang_step"]["last_error"]  # liveness_timeout_s 6
    assert f["sigint"]["exit_code"] == 130 and f["sigint"]["orphans"] == 0


def test_leak_recycles_tandem_stop_and_a_full_disk(tmp_path):
    f = chaos(tmp_path, "leak,stop,full_disk", 200)
    assert f["leak"]["recycles"] >= 3 and f["leak"]["learner_restarts"] == 0 and f["leak"]["actor_failures"] == 0
    assert f["stop"]["exit_code"] == 0 and f["stop"]["orphans"] == 0 and f["stop"]["checkpoint_written"]
    if not f["full_disk"]:  # the drill did not run (ok null): no tmpfs can be mounted here; a skip, not a pass
        pytest.skip("the full_disk drill needs root and unshare(1) to mount a tmpfs for the run")
    assert f["full_disk"]["learner_restarts"] == 0 and f["full_disk"]["disk_write_failures"] >= 1


def test_an_unknown_drill_is_a_usage_error_naming_it():
    result = subprocess.run(
        [sys.executable, "-m", "tandem", "chaos", "--only", "actor_kill,nonsense"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2 and "nonsense" in result.stderr
