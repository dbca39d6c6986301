"""Watching a socket's handshakes through a ZeroMQ monitor: when a link (re)connects, and why a secured one failed."""

from __future__ import annotations

import zmq

from tandem.protocol.errors import TransportError


def watch_connects(sock: zmq.Socket) -> zmq.Socket:
    """A monitor socket reporting each (re)connection of `sock` to a peer; read it with `connected_since`.

    It reports the end of the ZMTP handshake, not the TCP connect: with IMMEDIATE a message sent between
    the two is refused, so a request made on the TCP event could fail and wait a whole refresh period.
    """
    try:
        monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    except zmq.ZMQError as exc:
        raise TransportError(f"cannot monitor socket: {exc}") from exc
    monitor.setsockopt(zmq.LINGER, 0)
    return monitor


def connected_since(monitor: zmq.Socket) -> bool:
    """True if the monitored socket (re)connected since the last call; never waits."""
    from zmq.utils.monitor import recv_monitor_message

    seen = False
    try:
        while monitor.poll(0, zmq.POLLIN):
            event = recv_monitor_message(monitor, zmq.NOBLOCK)
            seen = seen or event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED
    except zmq.ZMQError as exc:
        raise TransportError(f"monitor read failed: {exc}") from exc
    return seen


HANDSHAKE_FAILURES = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "authentication refused",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "protocol error",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake failed",
}


def watch_handshake_failures(sock: zmq.Socket) -> zmq.Socket:
    """A monitor of `sock`'s failed handshakes (a CurveZMQ server refusing our key); read with `handshake_failure`."""
    events = 0
    for event in HANDSHAKE_FAILURES:
        events |= event
    try:
        monitor = sock.get_monitor_socket(events)
    except zmq.ZMQError as exc:
        raise TransportError(f"cannot monitor socket: {exc}") from exc
    monitor.setsockopt(zmq.LINGER, 0)
    return monitor


def handshake_failure(monitor: zmq.Socket) -> str:
    """Why the last handshake failed ('authentication refused', ...), or '' if none did; never waits."""
    from zmq.utils.monitor import recv_monitor_message

    why = ""
    try:
        while monitor.poll(0, zmq.POLLIN):
            event = recv_monitor_message(monitor, zmq.NOBLOCK)
            why = HANDSHAKE_FAILURES.get(event["event"], why)
    except zmq.ZMQError:
        return why
    return why


def stop_watching(sock: zmq.Socket, monitor: zmq.Socket) -> None:
    try:
        sock.disable_monitor()
    except zmq.ZMQError:
        pass  # the socket may already be closed
    monitor.close(linger=0)
