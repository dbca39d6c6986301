"""A real `tandem up`: /metrics and /healthz while it trains, then metrics.jsonl, TensorBoard and `tandem plot`."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from tandem.client.cli import cli
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.supervisor.ports import free_port
from tests.system.harness import finish, up


def scrape(port: int) -> dict[str, float]:
    """`metric{labels}` -> value of every sample, or {} while the endpoint is not up yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return {}
    return {
        f"{s.name}{sorted(s.labels.items())}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def run_total(samples: dict[str, float], name: str) -> float | None:
    return samples.get(f"{name}[('run', 'cartpole')]")


def test_a_run_exposes_metrics_and_writes_its_curves(tmp_path):
    port = free_port("127.0.0.1")
    proc = up(tmp_path, "stop.seconds=150", "stop.eval_return=1e9", f"supervisor.metrics_port={port}")  # no early solve
    try:
        deadline, first, samples = time.monotonic() + 120, None, {}
        while time.monotonic() < deadline and proc.poll() is None:
            samples = scrape(port)
            steps = run_total(samples, "tandem_env_steps_total")
            if first is None and steps:
                first = steps
            if (
                first is not None
                and steps > first
                and run_total(samples, "tandem_eval_return") is not None
                and run_total(samples, "tandem_mean_return_100") is not None
            ):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no moving env steps and returns on /metrics in time: {samples}")
        assert healthz(port) == 200
        assert (
            samples[
                "tandem_process_state[('process', 'learner-default'), ('role', 'learner'), "
                "('run', 'cartpole'), ('state', 'RUNNING')]"
            ]
            == 1
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # `tandem up` stops its daemons and exits 130
    out, err = finish(proc, 60)
    assert proc.returncode == ExitCode.INTERRUPTED, err[-3000:]
    assert scrape(port) == {}, "the endpoint stops with the supervisor"

    run = tmp_path / "run"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["env_steps"] >= first and records[-1]["elapsed_s"] > records[0]["elapsed_s"]
    assert any("eval_return" in r for r in records) and any("mean_return_100" in r for r in records)
    assert all(r["env_steps_per_s"] >= 0 and "updates_per_s" in r for r in records)

    result = CliRunner().invoke(cli, ["plot", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "report.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    pytest.importorskip("tensorboard", reason="tensorboard is optional (tandem[tensorboard])")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert acc.Scalars("eval_return") and acc.Scalars("mean_return_100")
    assert acc.Scalars("env_steps_per_s")[-1].step == records[-1]["env_steps"]
