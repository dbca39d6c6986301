"""SAC through `tandem up` on Pendulum: a short real run that gets far above random play."""

from __future__ import annotations

import json

from tests.system.harness import finish, up

RANDOM_RETURN = -1200.0  # Pendulum-v1 under uniform random torques scores about -1200 to -1500


def test_sac_learns_pendulum_far_above_random(tmp_path):
    proc = up(tmp_path, "stop.eval_return=-600.0", "stop.seconds=150", example="pendulum_sac.toml")
    out, err = finish(proc, 240)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["reason"].startswith("evaluation return"), summary
    assert summary["eval_return"] >= -600.0 > RANDOM_RETURN + 500, summary
