"""The supervisor inside `tandem up`, with real daemons: restarts, hangs, start-up deadlines, memory, leaks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tandem.client.harness import UpRun, live, replaced, rows, running, tree
from tests.system.harness import ROOT

QUICK = [
    "supervisor.heartbeat_interval_s=0.2",
    "supervisor.liveness_timeout_s=10.0",
    "supervisor.stop_grace_s=2.0",
    "supervisor.backoff_initial_s=0.2",
    "supervisor.backoff_max_s=1.0",
    "stop.seconds=600",
    "eval.enabled=false",
]


class Run(UpRun):
    """`tandem up examples/cartpole.toml` in `tmp_path` with QUICK settings, through the shared run harness."""

    def __init__(self, tmp_path: Path, overrides: list[str], flags: tuple[str, ...] = ()):
        self.tmp_path = tmp_path
        super().__init__(
            ROOT / "examples" / "cartpole.toml",
            tmp_path / "run",
            tmp_path / "up.out",
            overrides=[f"run.dir='{tmp_path}/run'", *QUICK, *overrides],
            flags=flags,
            cwd=tmp_path,
            env={"PYTHONPATH": str(ROOT)},
        )


@pytest.fixture
def run_up(tmp_path):
    runs = []

    def start(*overrides: str) -> Run:
        runs.append(Run(tmp_path, list(overrides)))
        return runs[-1]

    yield start
    for run in runs:
        run.close()


def test_sigkilled_actor_comes_back_ten_times_and_learner_keeps_updating(run_up):
    run = run_up("actors.count=2", "supervisor.crash_loop_max=50")
    run.wait(lambda d: all(r["state"] == "RUNNING" for r in d["processes"]), 60, "everything running")
    learner_pid = run.row("learner-default")["pid"]
    for i in range(10):
        pid = run.row("actor-0")["pid"]
        os.kill(pid, signal.SIGKILL)
        data = run.wait(replaced("actor-0", pid), 30, f"actor-0 back after kill {i + 1}")
    actor = rows(data)["actor-0"]
    assert actor["restarts"] == 10 and "SIGKILL" in actor["last_error"]
    updates = run.row("learner-default")["counters"]["updates"]
    run.wait(lambda d: rows(d)["learner-default"]["counters"]["updates"] > updates, 20, "the learner still updating")
    assert run.row("learner-default")["pid"] == learner_pid and run.row("actor-1")["restarts"] == 0


def test_sigstopped_actor_is_detected_and_replaced(run_up):
    run = run_up("actors.count=1", "supervisor.liveness_timeout_s=3.0")
    run.wait(running("actor-0"), 60, "actor running")
    pid = run.row("actor-0")["pid"]
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    data = run.wait(replaced("actor-0", pid), 30, "the frozen actor replaced")
    took = time.monotonic() - stopped_at
    print(f"frozen actor replaced after {took:.1f} s (liveness timeout 3 s, grace 2 s)")
    assert "hung" in rows(data)["actor-0"]["last_error"]
    assert took < 3 + 2 + 10
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_env_constructor_that_hangs_is_killed_at_its_deadline_and_rebuilt(run_up, tmp_path):
    marker = tmp_path / "hung-once"
    run = run_up(
        "actors.count=2",
        "env.id=tests.system.envs:hang_once_in_actor",
        f"env.kwargs.marker='{marker}'",
        "supervisor.build_env_deadline_s=3.0",
    )
    data = run.wait(
        lambda d: all(r["state"] == "RUNNING" for r in d["processes"]) and rows(d)["actor-0"]["restarts"] >= 1,
        60,
        "actor-0 rebuilt after its hung constructor",
    )
    assert marker.exists()
    error = rows(data)["actor-0"]["last_error"]
    assert "build_env 1/8" in error and "deadline" in error
    # where it hung, from the stack the daemon dumped when the supervisor gave up on it
    assert "tests/system/envs.py:" in error and error.endswith("in hang_once_in_actor"), error
    assert rows(data)["actor-1"]["restarts"] == 0


def test_env_that_always_raises_goes_fatal_with_its_error_in_status_json(run_up, tmp_path):
    run = run_up(
        "actors.count=2", "env.id=tests.system.envs:raise_in_actor", "env.kwargs.index=1", "supervisor.start_retries=3"
    )
    data = run.wait(lambda d: rows(d)["actor-1"]["state"] == "FATAL", 60, "actor-1 FATAL")
    actor = rows(data)["actor-1"]
    assert "ROM is missing" in actor["last_error"] and actor["restarts"] == 2
    assert actor["stage"].startswith("build_env")
    result = subprocess.run(
        [sys.executable, "-m", "tandem", "status", "--endpoint", run.endpoint, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 5, result.stderr  # ExitCode.UNHEALTHY
    assert "ROM is missing" in result.stdout
    run.wait(running("actor-0"), 60, "actor-0 running beside the FATAL one")


def test_actor_over_its_rss_limit_is_recycled_forever_and_nothing_else(run_up):
    # crash_loop_max 1: a single exit counted as a failure would make actor-0 FATAL; recycling must not count.
    run = run_up(
        "actors.count=2",
        "env.id=tests.system.envs:leak_in_actor",
        "supervisor.actor_rss_limit_mb=600",
        "supervisor.crash_loop_max=1",
    )
    run.wait(lambda d: all(r["state"] == "RUNNING" for r in d["processes"]), 60, "everything running")
    learner_pid = run.row("learner-default")["pid"]
    data = run.wait(lambda d: rows(d)["actor-0"]["recycles"] >= 3, 120, "actor-0 recycled at its memory limit")
    actor = rows(data)["actor-0"]
    assert "over its limit of 600 MiB" in actor["last_recycle"] and actor["state"] != "FATAL", actor
    assert actor["last_error"] == actor["last_recycle"]  # the supervisor's reason is the last error (2.4)
    assert rows(data)["actor-1"]["restarts"] == 0 and rows(data)["learner-default"]["pid"] == learner_pid


def test_a_leak_is_caught_between_heartbeats_even_while_the_process_is_silent(run_up):
    """The supervisor reads a child's RSS itself: a constructor that jumps over the limit and then sends no
    heartbeat is recycled for its memory long before the liveness timeout could call it hung."""
    run = run_up(
        "actors.count=1",
        "env.id=tests.system.envs:hog_in_constructor",
        "supervisor.actor_rss_limit_mb=600",
        "supervisor.liveness_timeout_s=300",
        "supervisor.build_env_deadline_s=300",
    )
    data = run.wait(lambda d: rows(d)["actor-0"]["recycles"] >= 1, 90, "actor-0 recycled at its memory limit")
    assert "over its limit of 600 MiB" in rows(data)["actor-0"]["last_recycle"], rows(data)["actor-0"]


def test_actors_past_max_age_are_recycled_and_the_learner_is_not(run_up):
    run = run_up("actors.count=1", "supervisor.max_age_s=3", "supervisor.crash_loop_max=1")
    run.wait(lambda d: rows(d)["learner-default"]["state"] == "RUNNING", 60, "the learner")
    learner_pid = run.row("learner-default")["pid"]
    data = run.wait(lambda d: rows(d)["actor-0"]["recycles"] >= 2, 60, "actor-0 recycled for its age")
    assert "max_age_s" in rows(data)["actor-0"]["last_recycle"]
    assert rows(data)["learner-default"]["pid"] == learner_pid and rows(data)["learner-default"]["recycles"] == 0


def test_fifty_actor_restarts_leave_supervisor_and_learner_flat(run_up):
    run = run_up("actors.count=1", "env.num_envs=2")
    run.wait(lambda d: all(r["state"] == "RUNNING" for r in d["processes"]), 60, "everything running")
    # What the learner's first updates allocate is start-up, not a leak.
    run.wait(lambda d: (d["policies"][0]["updates"] or 0) > 0, 60, "the learner training")
    supervisor = psutil.Process(run.proc.pid)
    learner = psutil.Process(run.row("learner-default")["pid"])

    def usage():
        return {
            p: (proc.memory_info().rss, proc.num_threads(), proc.num_fds())
            for p, proc in (("supervisor", supervisor), ("learner", learner))
        }

    for _ in range(3):  # warm-up restarts: first-time allocations are not leaks
        pid = run.row("actor-0")["pid"]
        run.channel.request("restart", {"name": "actor-0"})
        run.wait(replaced("actor-0", pid), 30, "restart")
    before = usage()
    for i in range(50):
        pid = run.row("actor-0")["pid"]
        assert run.channel.request("restart", {"name": "actor-0"}).ok
        run.wait(replaced("actor-0", pid), 30, f"restart {i + 1}")
    after = usage()
    for name in before:
        rss = (after[name][0] - before[name][0]) / 2**20
        threads, fds = after[name][1] - before[name][1], after[name][2] - before[name][2]
        print(f"{name}: after 50 actor restarts RSS {rss:+.1f} MiB, threads {threads:+d}, open files {fds:+d}")
        assert rss < 20 and threads <= 0 and fds <= 2, (name, rss, threads, fds)


def test_async_vector_env_whose_worker_hangs_is_killed_at_its_deadline_with_every_worker(run_up, tmp_path):
    marker = tmp_path / "hung-worker"
    run = run_up(
        "actors.count=1",
        "env.vector='async'",
        "env.num_envs=3",
        "supervisor.build_env_deadline_s=3.0",
        "env.id=tests.system.envs:hang_once_in_vector_worker",
        f"env.kwargs.marker='{marker}'",
    )
    run.wait(lambda d: marker.exists(), 60, "a vector env worker hanging in its constructor")
    hung, actor = map(int, marker.read_text().split())
    # the actor and its workers, as long as it has not been killed yet (the deadline is 3 s)
    procs = {*tree(actor), *tree(hung)[:1]}
    data = run.wait(
        lambda d: rows(d)["actor-0"]["restarts"] >= 1 and rows(d)["actor-0"]["state"] == "RUNNING",
        60,
        "actor-0 rebuilt after its hung vector env",
    )
    error = rows(data)["actor-0"]["last_error"]
    assert "build_env async x3" in error and "deadline" in error
    # where it hung: not only the actor's wait for its workers, but the worker's own constructor
    assert f"env worker pid {hung} at" in error and "in hang_once_in_vector_worker" in error, error
    deadline = time.monotonic() + 10
    while (alive := [p.pid for p in procs if live(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive, f"processes of the killed actor live on: {alive} (the hung worker was {hung})"
    # the rebuilt actor steps its vector env and its batches reach the learner
    run.wait(
        lambda d: rows(d)["actor-0"]["counters"].get("batches_sent", 0) > 0 and (d["policies"][0]["updates"] or 0) > 0,
        60,
        "batches from the vector env trained on",
    )


def test_actor_with_a_sync_vector_env_trains(run_up):
    run = run_up("actors.count=1", "env.vector='sync'", "env.num_envs=4", "env.max_episode_steps=20")
    data = run.wait(
        lambda d: rows(d)["actor-0"]["counters"].get("episodes", 0) >= 4 and (d["policies"][0]["updates"] or 0) > 0,
        60,
        "episodes from a sync vector env trained on",
    )
    assert rows(data)["actor-0"]["restarts"] == 0 and rows(data)["actor-0"]["counters"]["batches_sent"] > 0
