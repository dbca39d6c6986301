"""The sd_notify protocol module and the Reporter's use of it, against a real datagram socket in a temp dir."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tandem.daemons.runtime.reporter import Reporter, status_line
from tandem.daemons.runtime.sd_notify import Notifier, notify_address, watchdog_interval_s

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def listener(tmp_path):
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2.0)
    yield str(path), sock
    sock.close()


def received(sock: socket.socket) -> list[str]:
    """Every datagram waiting now (the first one waited for, at most the socket's timeout)."""
    out = [sock.recv(4096).decode()]
    sock.setblocking(False)
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(2.0)
    return out


def test_unset_socket_does_nothing():
    notifier = Notifier(env={}, pid=1)
    assert not notifier.enabled and notifier.send("READY=1") is False
    notifier.ready()
    notifier.tick(100.0, "running")
    assert notifier.sent == 0 and notifier.failures == 0 and notifier.sock is None


def test_abstract_address_gets_a_leading_nul():
    assert notify_address("@tandem/x") == b"\0tandem/x"
    assert notify_address("/run/systemd/notify") == "/run/systemd/notify"


def test_abstract_socket_receives():
    name = f"tandem-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(2.0)
    try:
        Notifier(env={"NOTIFY_SOCKET": f"@{name}"}).ready()
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


def test_send_failure_is_counted_not_raised(tmp_path):
    notifier = Notifier(env={"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})
    assert notifier.send("READY=1") is False
    notifier.tick(1.0, "running")
    assert notifier.failures == 2 and notifier.sent == 0


def test_watchdog_interval_is_half_and_only_for_our_pid():
    assert watchdog_interval_s({"WATCHDOG_USEC": "1000000"}, 7) == 0.5
    assert watchdog_interval_s({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "7"}, 7) == 0.5
    assert watchdog_interval_s({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "8"}, 7) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "junk"}, 7) is None
    assert watchdog_interval_s({}, 7) is None


def test_ready_stopping_once_and_watchdog_cadence(listener):
    path, sock = listener
    notifier = Notifier(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}, pid=5)
    notifier.ready("running: version 0")
    notifier.ready()
    assert received(sock) == ["READY=1\nSTATUS=running: version 0"]
    notifier.tick(10.0, "running: version 1")
    assert received(sock) == ["WATCHDOG=1", "STATUS=running: version 1"]
    notifier.tick(10.5, "running: version 2")  # too early for either
    notifier.tick(11.0, "running: version 2")  # watchdog due (1 s), status not yet (5 s)
    assert received(sock) == ["WATCHDOG=1"]
    notifier.stopping()
    notifier.stopping()
    assert received(sock) == ["STOPPING=1"]


def test_reporter_notifies_without_a_control_channel(listener):
    path, sock = listener
    threads = threading.active_count()
    reporter = Reporter(
        "learner",
        "learner-default",
        1.0,
        None,
        notifier=Notifier(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"}, pid=os.getpid()),
    )
    reporter.set_stage("running")
    assert received(sock) == ["READY=1\nSTATUS=running"]
    reporter.update({"updates": 10, "version": 3})
    assert reporter.next_beat == 0.0  # a watchdog ping is due: loops must not skip the tick
    assert reporter.tick(5.0) is False  # no heartbeat without a channel
    assert received(sock) == ["WATCHDOG=1", "STATUS=running: updates 10, version 3"]
    assert reporter.next_beat == 5.5
    assert threading.active_count() == threads  # no helper thread: only the loop that calls tick() feeds the watchdog
    reporter.set_stage("checkpoint")
    assert received(sock)[0].startswith("STOPPING=1")


def test_status_line_is_one_line_with_rates():
    line = status_line("build_env 1/2\nx", {"updates": 120, "version": 4, "return_mean": 21.5}, {"updates": 310.4})
    assert line == "build_env 1/2 x: updates 120 (310/s), version 4, return_mean 21.5"


def test_a_full_notify_socket_neither_blocks_nor_raises(listener):
    path, _ = listener  # nobody reads it: its queue fills
    notifier = Notifier(env={"NOTIFY_SOCKET": path})
    started = time.monotonic()
    for _ in range(5000):
        if not notifier.send("WATCHDOG=1"):
            break
    assert notifier.failures == 1 and time.monotonic() - started < 2.0


def test_sigterm_sends_stopping_at_once_from_any_stage(listener):
    """A process blocked outside its main loop (here: sleeping) still tells systemd it is stopping."""
    path, sock = listener
    code = (
        "import os, signal, time\n"
        "from tandem.daemons.runtime.signals import StopFlag\n"
        "stop = StopFlag().install()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(0.05)\n"
        "assert stop\n"
    )
    env = {**os.environ, "NOTIFY_SOCKET": path}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert received(sock) == ["STOPPING=1\nSTATUS=stopping on SIGTERM"]
