"""Backpressure with real processes: actors that follow the learner's pace leave it little to throw away."""

from __future__ import annotations

import json

import pytest

from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.harness import finish, up


@pytest.mark.timeout(150)
def test_paced_actor_leaves_the_learner_little_to_throw_away(tmp_path):
    # 32 samples per insert: the learner takes about 1 in 8 of the transitions one unpaced actor makes
    # (it would read and drop most batches); paced, the actor sends about its budget and waits.
    proc = up(
        tmp_path,
        "stop.seconds=25",
        "eval.enabled=false",
        "actors.count=1",
        "actors.follow_pace=true",
        "learner.samples_per_insert=32",
        "run.seed=2",
    )
    out, err = finish(proc, 120)
    assert proc.returncode == ExitCode.OK, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    ]
    last = rows[-1]
    read = last["batches_received"] + last["batches_over_ratio"]
    assert last["updates"] >= 200, last  # training went on
    assert any(r["pace_per_s"] > 0 for r in rows), "the learner never advertised a budget"
    assert summary["paced_s"] > 0, summary  # the actor waited for its budget
    # A generous bound: unpaced, this run throws away most of what it reads
    assert last["batches_over_ratio"] <= 0.35 * read, last
