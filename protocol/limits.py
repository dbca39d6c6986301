"""Size caps a receiver applies before it trusts any byte of a message."""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class Limits:
    """Caps checked by every `from_frames()`; the defaults are what PROTOCOL.md states."""

    max_frames: int = 1025
    """Most frames one message may have (header + up to 1024 arrays)."""
    max_header_bytes: int = 1 << 20
    """Largest msgpack header frame, checked before unpacking."""
    max_array_bytes: int = 1 << 31
    """Largest single array frame (also used as the sockets' MAXMSGSIZE)."""
    max_ndim: int = 8
    """Most dimensions of one array."""
    max_depth: int = 16
    """Deepest nesting of maps and lists in a header."""


DEFAULT_LIMITS = Limits()
