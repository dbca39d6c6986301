"""A daemon's or the CLI's link to the supervisor's control socket: fire-and-forget sends and timed requests."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from typing import Any

from tandem.protocol import ControlReply, ControlRequest, ProtocolError, decode, sockets


class ControlTimeout(TimeoutError):
    """No reply within the timeout; the message says which endpoint and command."""


class ControlChannel:
    """A DEALER to the control ROUTER. Replies to fire-and-forget sends are drained and ignored."""

    def __init__(self, ctx: Any, endpoint: str, opts: sockets.SocketOptions = sockets.DEFAULT_SOCKET_OPTIONS):
        self.endpoint = endpoint
        self.socket = sockets.control_dealer(ctx, endpoint, opts)
        self.ids = itertools.count(1)
        self.malformed = 0

    def send_message(self, message: Any) -> bool:
        """Queue one message without waiting; False if it could not be queued (supervisor gone, queue full)."""
        return sockets.send_message(self.socket, message)

    def send(self, command: str, args: Mapping[str, Any] | None = None) -> int:
        request_id = next(self.ids)
        self.send_message(ControlRequest(request_id, command, dict(args or {})))
        return request_id

    def drain(self) -> None:
        """Read whatever replies have arrived, so they never pile up."""
        while (frames := sockets.recv_frames(self.socket, 0)) is not None:
            self._keep(frames)

    def _keep(self, frames: list) -> ControlReply | None:
        try:
            message = decode(frames)
        except ProtocolError:
            self.malformed += 1
            return None
        return message if isinstance(message, ControlReply) else None

    def request(self, command: str, args: Mapping[str, Any] | None = None, timeout_s: float = 5.0) -> ControlReply:
        """Send a request and wait for its reply, at most `timeout_s`; raises ControlTimeout."""
        request_id = next(self.ids)
        deadline = time.monotonic() + timeout_s
        request = ControlRequest(request_id, command, dict(args or {}))
        while not sockets.send_message(self.socket, request, timeout_ms=50):
            if time.monotonic() >= deadline:
                raise ControlTimeout(f"could not send {command!r} to {self.endpoint} within {timeout_s:g} s")
        while (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            frames = sockets.recv_frames(self.socket, left_ms)
            if frames is None:
                break
            reply = self._keep(frames)
            if reply is not None and reply.request_id == request_id:
                return reply
        raise ControlTimeout(f"no reply to {command!r} from {self.endpoint} within {timeout_s:g} s")

    def close(self, linger_ms: int = 0) -> None:
        """Close; a daemon's last words (a final heartbeat) need a short `linger_ms` to leave the process."""
        sockets.close(self.socket, linger_ms=linger_ms)
