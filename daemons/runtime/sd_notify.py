"""systemd's sd_notify datagram protocol (READY, WATCHDOG, STATUS, STOPPING), spoken directly over AF_UNIX."""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)
STATUS_INTERVAL_S = 5.0  # how often STATUS= is refreshed: `systemctl status` is read by people, not scrapers


def notify_address(value: str) -> str | bytes:
    """$NOTIFY_SOCKET as a sendto() address: '@name' is Linux's abstract namespace (a leading NUL byte)."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


def watchdog_interval_s(env: Mapping[str, str], pid: int) -> float | None:
    """Half of $WATCHDOG_USEC, as sd_watchdog_enabled() advises; None when the watchdog is not ours or is off."""
    watchdog_pid = env.get("WATCHDOG_PID", "")
    if watchdog_pid and watchdog_pid != str(pid):
        return None  # meant for another process (e.g. our parent): a child must not feed it
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2e6 if usec > 0 else None


class Notifier:
    """Sends sd_notify messages when $NOTIFY_SOCKET is set; does nothing otherwise. Never raises.

    Call `tick(now, status)` from the daemon's main loop only, so a hung loop stops the WATCHDOG pings:

        notifier.ready()                       # sockets bound, first weights in
        while not stop:
            ...one step...
            notifier.tick(time.monotonic(), "running version 7, 120 updates/s")
        notifier.stopping()
    """

    def __init__(self, env: Mapping[str, str] | None = None, pid: int | None = None):
        env = os.environ if env is None else env
        pid = os.getpid() if pid is None else pid
        path = env.get("NOTIFY_SOCKET", "")
        self.address = notify_address(path) if path else None
        self.watchdog_s = watchdog_interval_s(env, pid) if self.address else None
        self.sock: socket.socket | None = None
        self.sent = 0
        self.failures = 0
        self.is_ready = self.is_stopping = False
        self.next_watchdog = 0.0
        self.next_status = 0.0
        self.last_status = ""

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def next_due(self) -> float:
        """When `tick` next has something to send (inf when nothing ever will)."""
        if self.address is None:
            return math.inf
        return min(self.next_status, self.next_watchdog if self.watchdog_s else math.inf)

    def send(self, message: str) -> bool:
        """One datagram; False (logged once, counted always) when it could not be sent."""
        if self.address is None:
            return False
        try:
            if self.sock is None:
                # Non-blocking: a notify socket that cannot take a datagram now must not stall a main loop.
                self.sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
                )
            self.sock.sendto(message.encode(), self.address)
        except OSError as exc:
            self.failures += 1
            if self.failures == 1:
                log.warning(
                    "could not notify systemd at %s (%s); further failures are only counted",
                    os.environ.get("NOTIFY_SOCKET", self.address),
                    exc,
                )
            return False
        self.sent += 1
        return True

    def ready(self, status: str = "") -> None:
        """READY=1, once: systemd then considers a Type=notify unit started."""
        if not self.is_ready:
            self.is_ready = True
            self.send("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def stopping(self, status: str = "") -> None:
        """STOPPING=1, once: the unit is shutting down on its own or on SIGTERM."""
        if not self.is_stopping:
            self.is_stopping = True
            self.send("STOPPING=1" + (f"\nSTATUS={status}" if status else ""))

    def tick(self, now: float, status: str = "") -> None:
        """WATCHDOG=1 every half watchdog period and STATUS= every STATUS_INTERVAL_S (when it changed)."""
        if self.address is None:
            return
        if self.watchdog_s and now >= self.next_watchdog:
            self.next_watchdog = now + self.watchdog_s
            self.send("WATCHDOG=1")
        if status and now >= self.next_status:
            self.next_status = now + STATUS_INTERVAL_S
            if status != self.last_status:
                self.last_status = status
                self.send(f"STATUS={status}")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


_shared: Notifier | None = None


def shared() -> Notifier:
    """This process's notifier, made from the environment on first use: one socket, one READY and one STOPPING."""
    global _shared
    if _shared is None:
        _shared = Notifier()
    return _shared
