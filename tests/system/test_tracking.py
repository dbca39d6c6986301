"""[tracking] wandb: a real run logs its curves to W&B in offline mode (no network), and a run that cannot
log says why before anything starts."""

from __future__ import annotations

import json
import os
import struct
import subprocess

import pytest

from tandem.client.harness import up_command
from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.harness import ROOT, finish

pytest.importorskip("wandb", reason="wandb is not installed (pip install 'tandem[tracking]'; CI installs it)")


def wandb_env(tmp_path) -> dict[str, str]:
    """No account, no network: W&B's own files under the test's directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        WANDB_CONFIG_DIR=str(home / ".config"),
        WANDB_CACHE_DIR=str(home / ".cache"),
        WANDB_DATA_DIR=str(home / ".data"),
        WANDB_SILENT="true",
    )
    return env


def up(tmp_path, *overrides: str) -> subprocess.Popen:
    args = up_command(
        ROOT / "examples" / "cartpole.toml",
        [f"run.dir='{tmp_path}/run'", "supervisor.heartbeat_interval_s=0.2", *overrides],
    )
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=wandb_env(tmp_path),
        start_new_session=True,
    )


def wandb_history(path) -> list[dict]:
    """The history rows of a W&B run file: a LevelDB-style log (32 KiB blocks, 7-byte record headers) of
    protobuf records after W&B's 7-byte file header; read here because wandb itself has no offline reader."""
    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", "not a W&B run file"
    rows, pos, chunks = [], 7, []
    while pos + 7 <= len(data):
        left = block - pos % block
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if left < 7 or (kind == 0 and length == 0):  # a block's padding
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        chunks = [chunk] if kind in (1, 2) else [*chunks, chunk]  # full or first; middle or last
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(chunks))
            if record.WhichOneof("record_type") == "history":
                rows.append(
                    {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                )
    return rows


def test_an_offline_wandb_run_holds_the_same_curves_as_metrics_jsonl(tmp_path):
    proc = up(
        tmp_path,
        "tracking.wandb=true",
        "tracking.mode='offline'",
        "tracking.project='tandem-test'",
        "stop.env_steps=3000",
        "stop.eval_return=1e9",
    )
    out, err = finish(proc, 150)
    assert proc.returncode == 0, err[-3000:]
    run_dir = tmp_path / "run"
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    offline = list((run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert len(offline) == 1, list((run_dir / "wandb").iterdir())
    history = wandb_history(offline[0])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # one W&B row per record of the run's curves, with the same names and values, against env steps
    assert len(history) == len(records) >= 2
    for row, record in zip(history, records):
        for name, value in record.items():
            if name != "time":
                assert row[name] == pytest.approx(value), name
    assert history[-1]["env_steps"] >= 3000


def test_online_tracking_without_an_api_key_is_refused_before_anything_starts(tmp_path):
    proc = up(tmp_path, "tracking.wandb=true", "stop.seconds=30")
    out, err = finish(proc, 60)
    assert proc.returncode == ExitCode.CONFIG, err[-3000:]
    assert "W&B API key" in err and "tracking.mode = 'offline'" in err, err[-3000:]
    assert not (tmp_path / "run" / "logs").exists() or not list((tmp_path / "run" / "logs").glob("*.log"))
