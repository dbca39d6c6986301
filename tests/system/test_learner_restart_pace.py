"""An on-policy learner killed with -9: its actors take the new learner's credit at once, not after 10 s."""

from __future__ import annotations

import os
import signal
import time

from tandem.client.harness import UpRun, replaced, rows
from tests.system.harness import ROOT
from tests.system.test_supervisor import QUICK

LEARNER = "learner-default"
KILLS = 4  # before the fix about half the kills stalled (both actors a share or more in debt): 4 catch it 15 in 16
FIRST_BATCH_S = 4.0  # from the kill to a batch at the new learner; the old credit expired after 10 s
SETTLE_S = 1.0  # training for a moment before each kill, so the actors are in their usual rhythm of debt


def received(name: str):
    return lambda d: rows(d)[name]["counters"].get("batches_received", 0) > 0


def test_actors_feed_a_restarted_appo_learner_at_once(tmp_path):
    """Two actors whose unrolls (512 transitions) are twice their share of a version's credit (256), so both
    are often in debt to the learner that is killed; the new one grants credit from its first version."""
    run = UpRun(
        ROOT / "examples" / "cartpole_appo.toml",
        tmp_path / "run",
        tmp_path / "up.out",
        overrides=[f"run.dir='{tmp_path}/run'", *QUICK, "actors.count=2", "supervisor.crash_loop_max=100"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT)},
    )
    try:
        run.wait(lambda d: rows(d)[LEARNER]["counters"].get("updates", 0) > 5, 90, "training")
        for kill in range(KILLS):
            time.sleep(SETTLE_S)
            pid = run.row(LEARNER)["pid"]
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            run.wait(replaced(LEARNER, pid), 30, f"the learner back after kill {kill + 1}")
            run.wait(received(LEARNER), 30, f"a batch at the new learner after kill {kill + 1}")
            waited = time.monotonic() - killed
            assert waited < FIRST_BATCH_S, f"kill {kill + 1}: the first batch came {waited:.1f} s after it"
            run.wait(lambda d: rows(d)[LEARNER]["counters"].get("updates", 0) > 2, 30, "training again")
    finally:
        run.close()
