"""What an action server takes from a game, checked in PROTOCOL.md 7.4's order: each refusal's code and request id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tandem.protocol import framing
from tandem.protocol.errors import ProtocolError
from tandem.protocol.game import GAME_LIMITS, GameBye, GameHello, GameStep
from tandem.protocol.game_plain import plain_step
from tandem.protocol.limits import Limits

# The kinds a server takes; any other `kind` string (a reply kind, another socket's kind, a typo) is `bad_kind`.
SERVER_KINDS: dict[str, type] = {cls.KIND: cls for cls in (GameHello, GameStep, GameBye)}


class BadRequest(ProtocolError):
    """A message a server refuses before it is a request: `code` (malformed, bad_kind) and the id to answer."""

    def __init__(self, code: str, message: str, request_id: int):
        super().__init__(message)
        self.code, self.request_id = code, request_id


def decode_request(frames: Sequence[Any], limits: Limits = GAME_LIMITS) -> GameHello | GameStep | GameBye:
    """A game_hello, game_step or game_bye; raises BadRequest (and nothing else) for anything else.

    Order: frames, header size and msgpack (malformed, id 0), version (malformed), kind (bad_kind), then
    the kind's fields and arrays (malformed). Once the header is a readable map, the refusal carries its
    `request_id` when that is an integer in [0, 2**63) (framing.request_id_of), whatever else is wrong.
    """
    step = plain_step(frames, limits)  # a game's every frame: read fast when plain (game_plain.py)
    if step is not None:
        return step
    try:
        header, views = framing.decode_header(frames, limits)
    except ProtocolError as exc:
        if exc.field not in ("v", "kind"):
            raise BadRequest("malformed", str(exc), 0) from exc
        # decode_header got past msgpack and the map checks: the header is readable, only v or kind is wrong
        header, _ = framing.read_header(frames, limits)  # cannot fail: decode_header got past these checks
        request_id = framing.request_id_of(header)
        if exc.field == "kind" and isinstance(header.get("kind"), str):
            raise BadRequest("bad_kind", kind_message(header["kind"]), request_id) from exc
        raise BadRequest("malformed", str(exc), request_id) from exc
    request_id = framing.request_id_of(header)
    cls = SERVER_KINDS.get(header["kind"])
    if cls is None:
        raise BadRequest("bad_kind", kind_message(header["kind"]), request_id)
    try:
        return cls.from_header(header, views, limits)  # the header is read once
    except ProtocolError as exc:
        raise BadRequest("malformed", str(exc), request_id) from exc


def kind_message(kind: str) -> str:
    return f"kind: a server takes {', '.join(SERVER_KINDS)}, not {kind[:100]!r}"
