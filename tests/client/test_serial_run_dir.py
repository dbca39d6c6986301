"""A serial run's directory is a run directory: `tandem plot`, `eval` and `export` take it as an async run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.client.run_curves import load

pytest.importorskip("matplotlib", reason="tandem plot draws with matplotlib (a dependency)")
APPO = Path(__file__).resolve().parents[2] / "examples" / "cartpole_appo.toml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def serial_up(run: Path, *extra: str):
    """A real serial CartPole run of 3072 env steps (a few seconds), a record every 1024."""
    return CliRunner().invoke(
        cli,
        ["up", str(APPO), "--serial", "--json", "--quiet", "--eval-every", "1024", *extra]
        + ["--set", f"run.dir='{run}'", "--set", "stop.env_steps=3072", "--set", "stop.seconds=100"],
    )


@pytest.mark.timeout(180)
def test_a_serial_run_can_be_plotted_evaluated_and_exported(tmp_path):
    run = tmp_path / "run"
    result = serial_up(run)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["serial"] and summary["reason"] == "3072 env steps >= 3072", summary

    assert (run / "config.toml").is_file()
    assert [p.name for p in (run / "learner-default").glob("ckpt-*.pt")] == [f"ckpt-{summary['version']:012d}.pt"]
    # the head and names of an async run's records (supervisor/progress.py), which tandem plot reads
    segments, total = load(run / "metrics.jsonl")
    assert total == 3 and [s.number for s in segments] == [1] and len(segments[0].records) == 3
    for record in segments[0].records:
        for key in ("segment", "elapsed_s", "env_steps", "env_steps_per_s", "updates", "updates_per_s"):
            assert isinstance(record[key], (int, float)), (key, record)
        assert "mean_return_100" in record and "eval_return" in record and "train/entropy" in record, record
    assert segments[0].records[-1]["env_steps"] == 3072

    result = CliRunner().invoke(cli, ["plot", str(run)])
    assert result.exit_code == 0 and "3 records" in result.output, result.output
    assert (run / "report.png").read_bytes().startswith(PNG_MAGIC)

    result = CliRunner().invoke(cli, ["eval", str(run), "--episodes", "2", "--json"])
    assert result.exit_code == 0, result.output
    measured = json.loads(result.output.strip().splitlines()[-1])
    assert len(measured["returns"]) == 2 and all(r > 0 for r in measured["returns"]), measured

    result = CliRunner().invoke(cli, ["export", str(run), str(tmp_path / "exported")])
    assert result.exit_code == 0 and "exported policy 'default'" in result.output, result.output
    assert {p.name for p in (tmp_path / "exported").iterdir()} >= {"policy.json", "weights.safetensors"}


@pytest.mark.timeout(180)
def test_a_serial_run_does_not_mix_into_an_earlier_run_unless_fresh(tmp_path):
    run = tmp_path / "run"
    assert serial_up(run).exit_code == 0
    again = serial_up(run)
    assert again.exit_code == 2 and "holds an earlier run" in again.output and "--fresh" in again.output
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 3  # untouched

    fresh = serial_up(run, "--fresh")
    assert fresh.exit_code == 0, fresh.output
    (previous,) = (run / "previous").iterdir()
    assert (previous / "metrics.jsonl").is_file() and list((previous / "learner-default").glob("ckpt-*.pt"))
    segments, total = load(run / "metrics.jsonl")
    assert total == 3 and [s.number for s in segments] == [1]  # the fresh run's own curves, one start


@pytest.mark.timeout(180)
def test_a_serial_run_checkpoints_every_so_many_updates_as_a_learner_does(tmp_path):
    run = tmp_path / "run"
    result = serial_up(run, "--set", "learner.checkpoint_every_updates=1")
    assert result.exit_code == 0, result.output
    written = sorted((run / "learner-default").glob("ckpt-*.pt"))
    # 3072 steps are 6 updates of 512: a checkpoint after each (the write-time share permitting) and the last,
    # of which the newest 3 are kept; by time alone (the first one 10 s in) the run leaves only its last
    assert len(written) == 3, [p.name for p in written]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_signal_ends_a_serial_run_with_a_last_checkpoint_and_exit_130(tmp_path, how):
    """SIGTERM (systemd, Slurm, `timeout`) and Ctrl-C end a serial run between steps: the last checkpoint holds the
    final weights, a last record is written, and the exit code is 130 as for `tandem up` (it used to die on SIGTERM
    without either)."""
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "run"
    command = [sys.executable, "-m", "tandem", "up", str(APPO), "--serial", "--json", "--quiet", "--eval-every", "512"]
    command += ["--set", f"run.dir='{run}'", "--set", "stop.seconds=100"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(records(run)) < 2:  # training, and records being written
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert len(records(run)) >= 2, "the run wrote no records within 60 s"
        proc.send_signal(getattr(signal, how))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["result"] == "stopped" and summary["reason"] == f"stopped on {how}", summary
    saved = sorted(p.name for p in (run / "learner-default").glob("ckpt-*.pt"))
    assert saved[-1] == f"ckpt-{summary['version']:012d}.pt"  # the final weights, not an older interval's
    assert records(run)[-1]["env_steps"] == summary["env_steps"]


def records(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]
