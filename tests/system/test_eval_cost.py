"""The evaluator's cost on a real run: `tandem status` shows it, and it stays within eval.max_cpu_share."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tandem.client.harness import end_group
from tests.system.harness import ROOT, up

WAIT_S = 90


def status(run_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tandem", "status", "--run-dir", str(run_dir), "--timeout", "10", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def evaluator_counters(run_dir) -> dict:
    result = status(run_dir, "--json")
    if result.returncode != 0:
        return {}
    rows = {r["name"]: r for r in json.loads(result.stdout)["processes"]}
    return rows.get("evaluator", {}).get("counters") or {}


def test_status_shows_what_the_evaluator_costs_and_it_keeps_to_its_share(tmp_path):
    proc = up(tmp_path, "eval.max_cpu_share=0.05", "eval.interval_s=0.1", "stop.seconds=80", "stop.eval_return=1e9")
    run_dir = tmp_path / "run"
    try:
        deadline, counters = time.monotonic() + WAIT_S, {}
        while time.monotonic() < deadline:
            counters = evaluator_counters(run_dir) if (run_dir / "endpoint").exists() else {}
            if counters.get("eval_rounds", 0) >= 4 and "eval_cpu_cores" in counters:
                break
            time.sleep(0.5)
        assert counters.get("eval_rounds", 0) >= 4, f"too few evaluation rounds in {WAIT_S} s: {counters}"
        allowed = counters["eval_cores_allowed"]
        assert 0 < allowed <= 0.05 * 64
        # averaged over whole cycles (a round and its pause); the heartbeats and weight polls in the pauses are
        # not budgeted (about 0.05 cores on a loaded 2-core machine); unbounded, an evaluator takes 0.5-1 core
        assert counters["eval_cpu_cores"] <= allowed * 1.5 + 0.06, counters
        assert counters["eval_wait_s"] > 0 or counters["eval_round_s"] >= 0.1, counters
        text = status(run_dir)
        assert text.returncode == 0 and "evaluator:" in text.stdout and "cores on average" in text.stdout, text.stdout
    finally:
        end_group(proc, 30)
