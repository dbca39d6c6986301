"""`tandem up` on an image env that is not ALE, preprocessed by `[env.pixels]` alone: APPO trains the Nature CNN,
and every batch the learner received carried its frame stacks as frames, each once (PROTOCOL.md 2.1.2)."""

from __future__ import annotations

import json

import pytest

from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.harness import ROOT, finish, up

PIXELS = [
    "env.id='tests.pixel_envs:MovingBlock'",
    "env.pixels.enabled=true",
    "env.num_envs=4",
    "model.kind='nature_cnn'",
    "model.init='orthogonal'",
    "algorithm.batch_size=256",
    "algorithm.epochs=1",
    "algorithm.minibatches=2",
    "actors.unroll_length=32",
    "eval.enabled=false",
]


@pytest.mark.timeout(300)
def test_appo_trains_a_nature_cnn_on_a_pixel_env_whose_frames_travel_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the daemons import tests.pixel_envs
    proc = up(tmp_path, *PIXELS, "stop.env_steps=3000", "stop.seconds=150", example="cartpole_appo.toml")
    out, err = finish(proc, 240)
    summary = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == ExitCode.OK and summary["env_steps"] >= 3000, (summary, err[-3000:])
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    ]
    last = rows[-1]
    print({k: last.get(k) for k in ("updates", "batches_received", "batches_framed", "transitions_inserted")}, summary)
    assert last["updates"] >= 2 and last["batches_malformed"] == 0, last
    assert last["batches_received"] > 0 and last["batches_framed"] == last["batches_received"], last
