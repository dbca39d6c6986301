"""Tandem's wire protocol v1: message types, framing, validation and socket settings (see PROTOCOL.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tandem.protocol import framing
from tandem.protocol.control import ControlReply, ControlRequest, Heartbeat
from tandem.protocol.errors import ProtocolError, TransportError
from tandem.protocol.game import GAME_MESSAGES
from tandem.protocol.limits import DEFAULT_LIMITS, PROTOCOL_VERSION, Limits
from tandem.protocol.transitions import TransitionBatch
from tandem.protocol.weights import WeightBlob, WeightRequest

Message = TransitionBatch | WeightBlob | WeightRequest | Heartbeat | ControlRequest | ControlReply
MESSAGE_TYPES: dict[str, type] = {
    cls.KIND: cls for cls in (TransitionBatch, WeightBlob, WeightRequest, Heartbeat, ControlRequest, ControlReply)
} | GAME_MESSAGES


def decode(frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> Message:
    """Decode a message of any kind; raises ProtocolError (and nothing else) for anything malformed."""
    header, _ = framing.decode_header(frames, limits)
    return MESSAGE_TYPES[header["kind"]].from_frames(frames, limits)


__all__ = [
    "ControlReply",
    "ControlRequest",
    "DEFAULT_LIMITS",
    "Heartbeat",
    "Limits",
    "Message",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "ProtocolError",
    "TransitionBatch",
    "TransportError",
    "WeightBlob",
    "WeightRequest",
    "decode",
]
