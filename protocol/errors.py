"""The wire layer's two errors: bad bytes from a peer, and trouble with a socket."""

from __future__ import annotations


class ProtocolError(ValueError):
    """A message that breaks protocol v1; `field` names the part that was wrong."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class TransportError(RuntimeError):
    """A ZeroMQ call failed (bad endpoint, address in use, closed context, ...)."""
