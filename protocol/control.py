"""Single-frame messages of the control plane: `Heartbeat`, `ControlRequest` and `ControlReply`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from tandem.protocol import framing
from tandem.protocol.errors import ProtocolError
from tandem.protocol.limits import DEFAULT_LIMITS, Limits


class HeaderFields:
    """A message of one KIND whose header fields FIELDS checks: `from_frames` reads the header and hands it to
    `from_header`, which a server that has read the header already calls itself (so it is read once)."""

    KIND: ClassVar[str]
    FIELDS: ClassVar[Mapping[str, framing.Checker]]
    LIMITS: ClassVar[Limits] = DEFAULT_LIMITS  # the caps `from_frames` checks when given none

    @classmethod
    def from_frames(cls, frames: Sequence[Any], limits: Limits | None = None) -> Self:
        limits = limits or cls.LIMITS
        return cls.from_header(*framing.decode_header(frames, limits), limits)

    @classmethod
    def from_header(cls, header: dict[str, Any], views: list[memoryview], limits: Limits | None = None) -> Self:
        """The message of a header-only kind: its FIELDS, in one frame (a kind with more overrides this)."""
        return cls(**cls.header_fields(header, views))

    @classmethod
    def header_fields(cls, header: Mapping[str, Any], views: list[memoryview], one_frame: bool = True) -> dict:
        """Check 6 for FIELDS of a header of this KIND; `one_frame`: the message has no array frames either."""
        framing.expect_kind(header, cls.KIND)
        if one_frame and len(views) != 1:
            raise ProtocolError(f"a {cls.KIND} has exactly one frame, got {len(views)}", "frames")
        return framing.take_fields(header, cls.FIELDS)


class HeaderOnly(HeaderFields):
    """`to_frames` for a dataclass whose fields all live in the header (one frame), each checked before it goes."""

    def to_frames(self) -> list[framing.Frame]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, check in self.FIELDS.items():
            check(name, fields[name])
        return framing.encode(self.KIND, fields)


@dataclass(frozen=True)
class Heartbeat(HeaderOnly):
    """What a daemon's main loop reports every interval: who it is, what stage it is in, its counters."""

    role: str  # "actor", "learner", "evaluator", "supervisor", ...
    name: str  # unique within a run, e.g. "actor-3" or "learner-default"
    pid: int
    host: str
    incarnation: int  # distinguishes restarts of the same name
    seq: int  # heartbeats sent by this incarnation
    stage: str  # e.g. "build_env 3/8", "wait_weights", "running"
    stage_elapsed_s: float  # time spent in the current stage
    counters: Mapping[str, int | float] = field(default_factory=dict)  # env_steps, batches_sent, version, ...
    rss_bytes: int = 0
    cpu_percent: float = 0.0
    error: str = ""  # the last error, empty when none

    KIND: ClassVar[str] = "heartbeat"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "role": framing.string,
        "name": framing.string,
        "pid": framing.count,
        "host": framing.string,
        "incarnation": framing.count,
        "seq": framing.count,
        "stage": framing.string,
        "stage_elapsed_s": framing.number,
        "counters": framing.number_map,
        "rss_bytes": framing.count,
        "cpu_percent": framing.number,
        "error": framing.string,
    }


@dataclass(frozen=True)
class ControlRequest(HeaderOnly):
    """A command to the supervisor (from the CLI or a daemon): `status`, `stop`, `register`, ..."""

    request_id: int
    command: str
    args: Mapping[str, Any] = field(default_factory=dict)

    KIND: ClassVar[str] = "control_request"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "command": framing.string,
        "args": framing.string_map,
    }


@dataclass(frozen=True)
class ControlReply(HeaderOnly):
    """The answer to one `ControlRequest`, matched by `request_id`; `code` names the error when not ok."""

    request_id: int
    ok: bool
    code: str = ""
    message: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    KIND: ClassVar[str] = "control_reply"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "ok": framing.boolean,
        "code": framing.string,
        "message": framing.string,
        "data": framing.string_map,
    }


def reply_address(frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> tuple[str, int]:
    """(kind, request_id) of a message that failed to decode, read from its header where that much is sound,
    so an error reply can carry the request's own id (PROTOCOL.md 2.5.2): also when its `v` or its `kind` is
    what is wrong. ("", 0) where even the header is unreadable; kind "" where it is not a string."""
    try:
        header, _ = framing.read_header(frames, limits)
    except ProtocolError:
        return "", 0
    kind = header.get("kind")
    return kind if isinstance(kind, str) else "", framing.request_id_of(header)
