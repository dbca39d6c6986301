"""The action server's game socket at the pace of a game's frames: read what waits as bytes, send replies in a batch.

An action server handles a small message per frame of every game, so the per-message cost of the general
helpers in protocol/sockets.py (zero-copy frames, flag enums combined per frame, a poll before each call)
is a large share of its time. These do the same with less: small frames are cheaper copied than wrapped,
and the flags are plain ints. Errors become TransportError as there; nothing here ever waits unbounded.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Iterable, Sequence
from typing import Any

import zmq

from tandem.protocol.errors import TransportError

_LAST = int(zmq.NOBLOCK)
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)
_EVENTS = int(zmq.EVENTS)
_RCVTIMEO = int(zmq.RCVTIMEO)
_SELECT_MAX_FD = 1023  # select() takes descriptors below FD_SETSIZE (1024)


def wait_readable(sock: zmq.Socket, timeout_s: float) -> bool:
    """True once a message waits on `sock`, False after `timeout_s` without one (microseconds matter here:
    ZeroMQ's own poll counts whole milliseconds, a long time for a batch that waits a fraction of one)."""
    end = time.monotonic() + timeout_s
    try:
        fd = sock.getsockopt(zmq.FD)
        if fd > _SELECT_MAX_FD:
            return bool(sock.poll(max(0, math.ceil(timeout_s * 1000)), _POLLIN))
        while True:
            # ZeroMQ's descriptor signals a change, not a message: ask the socket, then sleep on the descriptor
            # until the next change (one arriving between the two wakes the select at once).
            if sock.getsockopt(_EVENTS) & _POLLIN:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            select.select([fd], [], [], left)
    except zmq.ZMQError as exc:
        raise TransportError(f"poll failed: {exc}") from exc


def wait_writable(sock: zmq.Socket, timeout_s: float) -> bool:
    """True once a send would be queued, False after `timeout_s` with the queue still full."""
    try:
        return bool(sock.poll(max(0, math.ceil(timeout_s * 1000)), _POLLOUT))
    except zmq.ZMQError as exc:
        raise TransportError(f"poll failed: {exc}") from exc


def recv_now(sock: zmq.Socket) -> list[bytes] | None:
    """The next waiting message, each frame as bytes; None when nothing waits (never waits itself).

    A game's frames are small (a header and one observation; the socket's MAXMSGSIZE caps the largest), so
    copying them into bytes costs less than wrapping each in a zero-copy frame, and bytes are ours to keep."""
    try:
        return sock.recv_multipart(_LAST)
    except zmq.Again:
        return None
    except zmq.ZMQError as exc:
        raise TransportError(f"receive failed: {exc}") from exc


def recv_within(sock: zmq.Socket, timeout_s: float) -> list[bytes] | None:
    """The next message, waiting for it at most `timeout_s` (whole milliseconds, at least one) inside ZeroMQ;
    None when none came. A game waiting for its reply, or a server with no batch waiting, sleeps here in C,
    without wait_readable's Python around each wake-up: a fifth of a game process's CPU per frame when eight
    share two cores (docs/performance.md), CPU the server and the learner get instead."""
    try:
        sock.setsockopt(_RCVTIMEO, max(1, math.ceil(timeout_s * 1000)))
        return sock.recv_multipart(0)
    except zmq.Again:
        return None
    except zmq.ZMQError as exc:
        raise TransportError(f"receive failed: {exc}") from exc


def send_replies(sock: zmq.Socket, replies: Iterable[tuple[bytes, Sequence[Any]]]) -> int:
    """Queue each `(identity, frames)` on a ROUTER_MANDATORY socket without waiting; returns how many could not
    be queued (that game is gone, or its queue is full because it does not read): each is dropped, the rest go."""
    dropped = 0
    for identity, frames in replies:
        try:
            # ZeroMQ queues a multipart message atomically: only its first frame can fail (EHOSTUNREACH, EAGAIN)
            sock.send(identity, _MORE)
            for frame in frames[:-1]:
                sock.send(frame, _MORE)
            sock.send(frames[-1], _LAST)
        except zmq.ZMQError:
            dropped += 1
    return dropped


def send_now(sock: zmq.Socket, frames: Sequence[Any]) -> bool:
    """Queue one message without waiting (a game's step); False when the socket's queue is full."""
    try:
        for frame in frames[:-1]:
            sock.send(frame, _MORE)
        sock.send(frames[-1], _LAST)
    except zmq.Again:
        return False
    except zmq.ZMQError as exc:
        raise TransportError(f"send failed: {exc}") from exc
    return True
