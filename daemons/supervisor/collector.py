"""A minimal control endpoint for benchmarks and tests: collects heartbeats, answers daemons' requests."""

from __future__ import annotations

import time

from tandem.protocol import ControlReply, ControlRequest, Heartbeat, ProtocolError, decode, sockets

GRANTED_COMMANDS = ("episodes", "register", "start_token")


class HeartbeatCollector:
    """Binds a control ROUTER like the supervisor's; keeps every daemon's heartbeats with their arrival times.

    It grants start tokens and accepts registrations and episode reports; anything else (such as `lookup`)
    is answered `unknown_command`, so daemons fall back to the config's addresses.
    """

    def __init__(self) -> None:
        self.ctx = sockets.new_context()
        self.router = sockets.control_router(self.ctx, "tcp://127.0.0.1:*")
        self.endpoint = sockets.bound_endpoint(self.router)
        self.history: dict[str, list[tuple[float, Heartbeat]]] = {}
        self.episode_returns: list[float] = []

    def pump(self, timeout_ms: int = 50) -> None:
        if not sockets.poll([self.router], timeout_ms):
            return
        while (frames := sockets.recv_frames(self.router, 0)) is not None:
            try:
                message = decode(frames[1:])
            except ProtocolError:
                continue
            if isinstance(message, Heartbeat):
                self.history.setdefault(message.name, []).append((time.monotonic(), message))
            elif isinstance(message, ControlRequest):
                if message.command == "episodes":
                    self.episode_returns.extend(message.args.get("returns", []))
                if message.command in GRANTED_COMMANDS:
                    reply = ControlReply(message.request_id, True, data={"granted": True})
                else:
                    reply = ControlReply(message.request_id, False, "unknown_command", message.command)
                sockets.send_message(self.router, reply, identity=bytes(frames[0]))

    @property
    def beats(self) -> dict[str, Heartbeat]:
        """The latest heartbeat of each daemon."""
        return {name: items[-1][1] for name, items in self.history.items() if items}

    def last(self, name: str) -> Heartbeat | None:
        return self.history[name][-1][1] if self.history.get(name) else None

    def counter(self, name: str, key: str, default: float = 0):
        beat = self.last(name)
        return beat.counters.get(key, default) if beat else default

    def rate(self, name: str, key: str, since: float) -> float:
        """Counter growth per second between the first and the last heartbeat that arrived after `since`."""
        window = [(t, b.counters.get(key, 0)) for t, b in self.history.get(name, []) if t >= since]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return 0.0
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])

    def close(self) -> None:
        sockets.close_context(self.ctx, linger_ms=0)
