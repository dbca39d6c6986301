"""Fixtures for the deploy tests: a fake systemd notify socket, and the system tests' process fixtures."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from tests.system.conftest import procs  # noqa: F401 - the same fixture: every process it starts is ended

SO_TIMESTAMP = getattr(socket, "SO_TIMESTAMP", 29)  # Python leaves it out; 29 on Linux x86-64 and arm64


class NotifyListener:
    """An AF_UNIX datagram socket standing in for systemd's, read by a thread: (arrival time, message) pairs.

    Arrival times are the kernel's (SO_TIMESTAMP, wall clock), so cadences are exact however late we read.
    """

    def __init__(self, path: Path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.messages: list[tuple[float, str]] = []
        self.closed = threading.Event()
        self.reader = threading.Thread(target=self._read, name=f"notify-{path.name}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while not self.closed.is_set():
            try:
                data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(16))
            except TimeoutError:
                continue
            except OSError:
                return
            stamp = time.time()
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMP:
                    seconds, micros = struct.unpack("qq", value[:16])
                    stamp = seconds + micros / 1e6
            self.messages.append((stamp, data.decode()))

    def pump(self, duration_s: float = 0.0) -> None:
        """Let `duration_s` pass while the reader collects."""
        time.sleep(duration_s)

    def wait_for(self, fragment: str, timeout_s: float, procs=None) -> float:  # noqa: F811 - not the fixture
        """When a message containing `fragment` arrived (waiting at most `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for t, message in list(self.messages):
                if fragment in message:
                    return t
            if time.monotonic() >= deadline:
                raise AssertionError(f"no {fragment!r} within {timeout_s:g} s; got {[m for _, m in self.messages]}")
            if procs is not None:
                procs.check_alive()
            time.sleep(0.05)

    def times(self, fragment: str, since: float = 0.0) -> list[float]:
        return [t for t, m in list(self.messages) if fragment in m and t >= since]

    def close(self) -> None:
        self.closed.set()
        self.reader.join(timeout=2.0)
        self.sock.close()


@pytest.fixture
def notify_socket(tmp_path):
    """A factory of fake notify sockets in the test's temp dir, all closed afterwards."""
    made: list[NotifyListener] = []

    def make(name: str) -> NotifyListener:
        made.append(NotifyListener(tmp_path / f"{name}.sock"))
        return made[-1]

    yield make
    for listener in made:
        listener.close()
