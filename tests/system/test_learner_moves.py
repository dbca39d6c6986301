"""A learner restarted elsewhere (other ports, as a rescheduled pod or a requeued job gets): actors and action
servers follow it."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tandem.client.harness import UpRun, kill_session
from tests.system.harness import ROOT, join_learner
from tests.system.test_supervisor import QUICK, Run, rows


def end(proc: subprocess.Popen | None) -> None:
    """SIGKILL whatever the session `proc` leads still runs (None: never started)."""
    if proc is not None:
        kill_session(proc)
        proc.wait(timeout=10)


FOLLOW = ["learner.remote=true", "actors.relookup_after_s=2", "supervisor.liveness_timeout_s=30"]


def game_run(tmp_path) -> UpRun:
    """`tandem up examples/game_cartpole.toml` (an action server as actor-0), with QUICK settings."""
    return UpRun(
        ROOT / "examples" / "game_cartpole.toml",
        tmp_path / "run",
        tmp_path / "up.out",
        overrides=[f"run.dir='{tmp_path}/run'", *QUICK, "algorithm.batch_size=256", *FOLLOW],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT)},
    )


def start_games(tmp_path) -> subprocess.Popen:
    """Two games of the example, playing until they are ended."""
    with (tmp_path / "games.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "cartpole_game.py"), "--run-dir", str(tmp_path / "run")]
            + ["--games", "2", "--seconds", "600"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=tmp_path,
            start_new_session=True,
        )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("served", [False, True], ids=["actor", "game-server"])
def test_an_actor_follows_its_learner_to_new_ports_without_restarting(tmp_path, served):
    run = game_run(tmp_path) if served else Run(tmp_path, ["actors.count=1", *FOLLOW])
    games = start_games(tmp_path) if served else None
    first = second = None
    try:
        first = join_learner(tmp_path, run.endpoint, "tcp://127.0.0.1:*", "learner-1.log")

        def learner(d) -> dict:
            return rows(d).get("learner-default", {})

        data = run.wait(
            lambda d: (
                (learner(d).get("counters", {}).get("updates") or 0) > 10 and rows(d)["actor-0"]["state"] == "RUNNING"
            ),
            90,
            "the first learner training",
        )
        old = run.channel.request("lookup", {"policy": "default"}, timeout_s=5).data["endpoints"]
        actor_pid, version = rows(data)["actor-0"]["pid"], rows(data)["actor-0"]["version"]
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        # Its replacement binds other free ports and registers them; nobody tells the actor.
        second = join_learner(tmp_path, run.endpoint, "tcp://127.0.0.1:*", "learner-2.log")
        data = run.wait(
            lambda d: (
                learner(d).get("pid") == second.pid and (rows(d)["actor-0"]["counters"].get("learner_moves") or 0) >= 1
            ),
            90,
            "the actor following the learner to its new ports",
        )
        new = run.channel.request("lookup", {"policy": "default"}, timeout_s=5).data["endpoints"]
        assert new["transitions"] != old["transitions"], (old, new)
        inserted = learner(data)["counters"].get("transitions_inserted") or 0
        data = run.wait(
            lambda d: (
                (learner(d).get("counters", {}).get("transitions_inserted") or 0) > inserted + 100
                and (rows(d)["actor-0"]["version"] or -1) > version
            ),
            90,
            "the new learner taking the actor's transitions, the actor its versions",
        )
        assert rows(data)["actor-0"]["pid"] == actor_pid  # followed, not restarted
    finally:
        end(games)
        end(first)
        end(second)
        run.close()
