"""Real daemons and a fake systemd notify socket: READY, WATCHDOG cadence, STATUS, STOPPING; a stuck loop is silent."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time

from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.protocol import sockets
from tests.system.harness import ROOT, write_config

WATCHDOG_USEC = 1_000_000  # -> a WATCHDOG=1 every 0.5 s
FAST = ["eval.enabled=false", "actors.count=1", "env.num_envs=2", "learner.checkpoint_interval_s=600"]


def notify_env(listener, **extra: str) -> dict[str, str | None]:
    return {"NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": str(WATCHDOG_USEC), "WATCHDOG_PID": None, **extra}


def check_watchdog_cadence(listener, since: float) -> None:
    times = listener.times("WATCHDOG=1", since)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(gaps) >= 3, listener.messages
    # Half of WATCHDOG_USEC, with room for a loaded 2-core machine; never near the full period.
    assert 0.4 <= statistics.median(gaps) <= 0.75, gaps
    assert max(gaps) < 0.95, gaps


def test_learner_and_actor_notify_systemd_without_a_supervisor(tmp_path, procs, notify_socket):
    _, config = write_config(tmp_path, FAST)
    learner_sock, actor_sock = notify_socket("l"), notify_socket("a")
    learner = procs.start("learner", "learner", str(config), env=notify_env(learner_sock))
    ready = learner_sock.wait_for("READY=1", 60, procs)
    learner_sock.pump(2.0)  # its main loop, idle: no actor yet
    check_watchdog_cadence(learner_sock, ready)
    assert any(m.startswith("STATUS=running") and "version" in m for _, m in learner_sock.messages), (
        learner_sock.messages
    )

    actor = procs.start("actor", "actor", str(config), "--index", "0", env=notify_env(actor_sock))
    actor_ready = actor_sock.wait_for("READY=1", 60, procs)
    actor_sock.pump(2.0)
    check_watchdog_cadence(actor_sock, actor_ready)
    actor_sock.wait_for("env_steps", 10)  # its STATUS= line carries its counters
    # Training: the learner's first update blocks its loop for seconds (torch's lazy set-up; why the units'
    # WatchdogSec is generous), so here only ask that the pings go on.
    learner_sock.wait_for("updates", 15)
    training = time.time()
    learner_sock.pump(1.5)
    assert len(learner_sock.times("WATCHDOG=1", training)) >= 2, learner_sock.messages[-5:]

    # A main loop that does not run (here: the whole process stopped) sends no WATCHDOG=1.
    learner.send_signal(signal.SIGSTOP)
    try:
        learner_sock.pump(0.3)  # what was in flight
        stopped_at = time.time()
        learner_sock.pump(1.5)
        assert not learner_sock.times("WATCHDOG=1", stopped_at)
    finally:
        learner.send_signal(signal.SIGCONT)
    resumed = time.time()
    learner_sock.pump(1.2)
    assert learner_sock.times("WATCHDOG=1", resumed)

    for name, proc, sock in (("actor", actor, actor_sock), ("learner", learner, learner_sock)):
        procs.expected_dead.add(name)
        proc.send_signal(signal.SIGTERM)
        sock.wait_for("STOPPING=1", 15)
        assert proc.wait(timeout=20) == 0, procs.log(name)[-2000:]


def test_supervisor_without_children_notifies_and_watches_daemons_started_elsewhere(tmp_path, procs, notify_socket):
    _, config = write_config(
        tmp_path, FAST + ["supervisor.heartbeat_interval_s=0.2", "supervisor.liveness_timeout_s=2.0"]
    )
    sup_sock = notify_socket("s")
    sup = procs.start("supervisor", "supervise", str(config), "--no-children", env=notify_env(sup_sock))
    sup_sock.wait_for("READY=1", 30, procs)
    endpoint = (tmp_path / "run" / "endpoint").read_text().strip()
    procs.start("learner", "learner", str(config), "--control", endpoint)
    actor = procs.start("actor", "actor", str(config), "--index", "0", "--control", endpoint)

    ctx = sockets.new_context()
    channel = ControlChannel(ctx, endpoint)

    def wait_rows(predicate, timeout_s: float, what: str) -> dict:
        deadline, data = time.monotonic() + timeout_s, {}
        while time.monotonic() < deadline:
            procs.check_alive()
            try:
                data = channel.request("status", timeout_s=5).data
            except ControlTimeout:  # a loaded machine can starve the supervisor; the deadline decides
                continue
            rows = {r["name"]: r for r in data["processes"]}
            if predicate(rows):
                return rows
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}: {data}")

    try:
        check_supervised(procs, sup, sup_sock, actor, endpoint, wait_rows)
    finally:
        channel.close()
        sockets.close_context(ctx, 0)


def check_supervised(procs, sup, sup_sock, actor, endpoint, wait_rows) -> None:
    rows = wait_rows(
        lambda r: all(
            r.get(n, {}).get("stage") == "running" and r[n]["state"] == "REMOTE" for n in ("learner-default", "actor-0")
        ),
        60,
        "learner and actor running",
    )
    assert rows["actor-0"]["pid"] == actor.pid
    sup_sock.pump(1.0)
    assert any(m.startswith("STATUS=supervising") for _, m in sup_sock.messages), sup_sock.messages
    assert len(sup_sock.times("WATCHDOG=1")) >= 2

    actor.send_signal(signal.SIGSTOP)  # hung: it is not restarted here (systemd would), only shown as lost
    try:
        rows = wait_rows(lambda r: r["actor-0"]["state"] == "REMOTE-LOST", 15, "the silent actor shown as lost")
        assert rows["actor-0"]["pid"] == actor.pid
    finally:
        actor.send_signal(signal.SIGCONT)

    procs.expected_dead.add("supervisor")
    stop = subprocess.run(
        [sys.executable, "-m", "tandem", "stop", "--endpoint", endpoint],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert stop.returncode == 0 and "keep running" in stop.stdout, stop
    sup_sock.wait_for("STOPPING=1", 10)
    assert sup.wait(timeout=15) == 0
    assert actor.poll() is None  # not its to stop
