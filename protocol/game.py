"""The game protocol (PROTOCOL.md section 7): a game process asks an action server for actions, step by step."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from tandem.protocol import framing
from tandem.protocol.control import HeaderFields, HeaderOnly
from tandem.protocol.errors import ProtocolError
from tandem.protocol.game_entities import MAX_GAME_KEYS, entities_field, keyed_arrays, keyed_out
from tandem.protocol.limits import Limits

MAX_GAME_STREAMS = 256  # streams one connection may open
MAX_NAME_CHARS = 200
# A game's messages are small: a header of a few fields and one observation. The server also caps the
# observation frame at what its configured space needs, before trusting a byte of it.
# An entity game's step carries one array per key of its observation, and its welcome names the heads' actor types
# in a list in a map in a list in a map in the spaces map (PROTOCOL.md 7.6): frames and depth allow both.
GAME_LIMITS = Limits(
    max_frames=1 + MAX_GAME_KEYS, max_header_bytes=64 * 1024, max_array_bytes=64 << 20, max_ndim=8, max_depth=6
)
GAME_KINDS = ("game_hello", "game_welcome", "game_step", "game_action", "game_error", "game_bye")
ACTION_KINDS = ("discrete", "box", "entities")

# Error codes a server sends in a game_error (PROTOCOL.md 7.2); `fatal` ones end the connection's session.
ERROR_CODES = (
    "malformed",
    "bad_kind",
    "no_session",
    "space_mismatch",
    "server_busy",
    "unknown_stream",
    "bad_obs",
    "busy",
    "no_action_pending",
    "cancelled",
    "timeout",
    "shutdown",
)
# Notices answer no request: they carry request_id 0 and are fatal (the session is gone).
NOTICE_CODES = ("timeout", "shutdown")


def name_string(name: str, value: Any) -> str:
    if len(framing.string(name, value)) > MAX_NAME_CHARS:
        raise ProtocolError(f"at most {MAX_NAME_CHARS} characters", name)
    return value


def finite_number(name: str, value: Any) -> float:
    number = framing.number(name, value)
    if not math.isfinite(number):
        raise ProtocolError(f"must be finite, got {number}", name)
    return number


def int_list(name: str, value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) > 8:
        raise ProtocolError("must be a list of at most 8 integers", name)
    return [framing.count(f"{name}[{i}]", v) for i, v in enumerate(value)]


def dtype_name(name: str, value: Any) -> str:
    if framing.string(name, value) not in framing.ALLOWED_DTYPES:
        raise ProtocolError(f"dtype {value!r} is not allowed (allowed: {', '.join(framing.ALLOWED_DTYPES)})", name)
    return value


@dataclass(frozen=True)
class GameSpaces:
    """What a stream observes and does: obs shape and dtype; a discrete action count or a box's shape and dtype."""

    obs_shape: tuple[int, ...]
    obs_dtype: str  # numpy .str, e.g. "<f4"
    action_kind: str  # "discrete" or "box"
    action_n: int = 0  # discrete: the number of actions
    action_shape: tuple[int, ...] = ()  # box: the shape of one action
    action_dtype: str = "<i8"  # "<i8" for discrete
    # action_kind "entities" (PROTOCOL.md 7.6): the entity types, global features, masks and heads, as JSON
    entities: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        out = {
            "obs_shape": list(self.obs_shape),
            "obs_dtype": self.obs_dtype,
            "action_kind": self.action_kind,
            "action_n": self.action_n,
            "action_shape": list(self.action_shape),
            "action_dtype": self.action_dtype,
        }
        if self.entities is not None:  # plain spaces stay exactly as before
            out["entities"] = self.entities
        return out

    @classmethod
    def from_wire(cls, value: Any, where: str = "spaces") -> GameSpaces:
        data = framing.string_map(where, value)
        for key in ("obs_shape", "obs_dtype", "action_kind", "action_n", "action_shape", "action_dtype"):
            if key not in data:
                raise ProtocolError("required field is missing", f"{where}.{key}")
        kind = framing.string(f"{where}.action_kind", data["action_kind"])
        if kind not in ACTION_KINDS:
            raise ProtocolError(f"must be one of {', '.join(ACTION_KINDS)}, got {kind!r}", f"{where}.action_kind")
        entities = data.get("entities")
        if (kind == "entities") != (entities is not None):
            raise ProtocolError("is given exactly when action_kind is 'entities'", f"{where}.entities")
        return cls(
            tuple(int_list(f"{where}.obs_shape", data["obs_shape"])),
            dtype_name(f"{where}.obs_dtype", data["obs_dtype"]),
            kind,
            framing.count(f"{where}.action_n", data["action_n"]),
            tuple(int_list(f"{where}.action_shape", data["action_shape"])),
            dtype_name(f"{where}.action_dtype", data["action_dtype"]),
            None if entities is None else entities_field(f"{where}.entities", entities),
        )

    def differences(self, other: GameSpaces) -> list[str]:
        """What differs from `other`, in words ('obs_shape [4] != [5]'); empty when they agree."""
        mine, theirs = self.to_wire(), other.to_wire()
        keys = list(dict.fromkeys([*mine, *theirs]))  # an entity server's spaces have one key more
        return [f"{key} {mine.get(key)!r} != {theirs.get(key)!r}" for key in keys if mine.get(key) != theirs.get(key)]


class GameMessage(HeaderFields):
    """A message of the game protocol: `from_frames` checks GAME_LIMITS unless given others."""

    LIMITS: ClassVar[Limits] = GAME_LIMITS


def optional_spaces(name: str, value: Any) -> GameSpaces | None:
    return None if value is None else GameSpaces.from_wire(value, name)


@dataclass(frozen=True)
class GameHello(GameMessage):
    """Game -> server: open a session of `streams` env streams; `spaces` (optional) must equal the server's."""

    request_id: int
    game: str  # a name for logs and status
    streams: int = 1
    spaces: GameSpaces | None = None

    KIND: ClassVar[str] = "game_hello"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "game": name_string,
        "streams": framing.count,
    }

    def to_frames(self) -> list[framing.Frame]:
        fields = {
            "request_id": self.request_id,
            "game": self.game,
            "streams": self.streams,
            "spaces": None if self.spaces is None else self.spaces.to_wire(),
        }
        return framing.encode(self.KIND, fields)

    @classmethod
    def from_header(cls, header: dict[str, Any], views: list[memoryview], limits: Limits = GAME_LIMITS) -> GameHello:
        fields = cls.header_fields(header, views)
        if not 1 <= fields["streams"] <= MAX_GAME_STREAMS:
            raise ProtocolError(f"must be 1 to {MAX_GAME_STREAMS}, got {fields['streams']}", "streams")
        return cls(**fields, spaces=optional_spaces("spaces", header.get("spaces")))


@dataclass(frozen=True)
class GameWelcome(GameMessage):
    """Server -> game: the session is open; the stream ids to step, the spaces, and the silence timeout."""

    request_id: int
    streams: list[int]
    spaces: GameSpaces
    timeout_s: float
    server: str = ""

    KIND: ClassVar[str] = "game_welcome"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "timeout_s": finite_number,
        "server": framing.string,
    }

    def to_frames(self) -> list[framing.Frame]:
        return framing.encode(
            self.KIND,
            {
                "request_id": self.request_id,
                "streams": list(self.streams),
                "spaces": self.spaces.to_wire(),
                "timeout_s": self.timeout_s,
                "server": self.server,
            },
        )

    @classmethod
    def from_header(cls, header: dict[str, Any], views: list[memoryview], limits: Limits = GAME_LIMITS) -> GameWelcome:
        fields = cls.header_fields(header, views, one_frame=False)
        streams = header.get("streams")
        if not isinstance(streams, list) or not 1 <= len(streams) <= MAX_GAME_STREAMS:
            raise ProtocolError(f"must be a list of 1 to {MAX_GAME_STREAMS} stream ids", "streams")
        ids = [framing.count(f"streams[{i}]", s) for i, s in enumerate(streams)]
        return cls(**fields, streams=ids, spaces=GameSpaces.from_wire(header.get("spaces")))


@dataclass(frozen=True, eq=False)
class GameStep(GameMessage):
    """Game -> server: the outcome of the stream's last action (reward, done, truncated) and `obs`.

    Without done or truncated, `obs` is the observation to act on and an action comes back. With either,
    the episode ended at the last action and `obs` is its last observation (the final observation of a
    truncated one); the reply carries no action and the stream's next step starts a new episode.
    """

    request_id: int
    stream: int
    obs: np.ndarray | dict[str, np.ndarray]  # a dict: an entity game's observation, one array a key (7.6)
    reward: float = 0.0
    done: bool = False
    truncated: bool = False

    KIND: ClassVar[str] = "game_step"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "stream": framing.count,
        "reward": finite_number,
        "done": framing.boolean,
        "truncated": framing.boolean,
    }

    def to_frames(self) -> list[framing.Frame]:
        return framing.encode(
            self.KIND,
            {
                "request_id": self.request_id,
                "stream": self.stream,
                "reward": float(self.reward),
                "done": bool(self.done),
                "truncated": bool(self.truncated),
            },
            keyed_out(self.obs, "obs"),
        )

    @classmethod
    def from_header(cls, header: dict[str, Any], views: list[memoryview], limits: Limits = GAME_LIMITS) -> GameStep:
        fields = cls.header_fields(header, views, one_frame=False)
        arrays = framing.take_arrays(header, views, limits)
        return cls(**fields, obs=keyed_arrays(arrays, "obs"))


@dataclass(frozen=True, eq=False)
class GameAction(GameMessage):
    """Server -> game: the action for the step `request_id` of `stream` (None after an episode's end)."""

    request_id: int
    stream: int
    version: int
    action: np.ndarray | dict[str, np.ndarray] | None = None  # a dict: an entity game's, one array a head (7.6)

    KIND: ClassVar[str] = "game_action"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "stream": framing.count,
        "version": framing.version_or_none,
    }

    def to_frames(self) -> list[framing.Frame]:
        # flat on the wire: [1] for a discrete action, [prod(shape)] for a box (the receiver knows the shape)
        if isinstance(self.action, Mapping):
            arrays = [(f"action.{head}", np.asarray(a).reshape(-1)) for head, a in self.action.items()]
        else:
            arrays = [] if self.action is None else [("action", np.asarray(self.action).reshape(-1))]
        return framing.encode(
            self.KIND, {"request_id": self.request_id, "stream": self.stream, "version": self.version}, arrays
        )

    @classmethod
    def from_header(cls, header: dict[str, Any], views: list[memoryview], limits: Limits = GAME_LIMITS) -> GameAction:
        fields = cls.header_fields(header, views, one_frame=False)
        arrays = framing.take_arrays(header, views, limits) if "arrays" in header else {}
        action = keyed_arrays(arrays, "action") if arrays else None
        for name, a in action.items() if isinstance(action, dict) else [("", action)] if arrays else []:
            if a.ndim != 1:
                raise ProtocolError(
                    f"must be flat (1-D), got shape {list(a.shape)}", f"action{'.' if name else ''}{name}"
                )
        return cls(**fields, action=action)


@dataclass(frozen=True)
class GameError(HeaderOnly, GameMessage):
    """Server -> game: request `request_id` was refused (0: unreadable, or a notice); `fatal`: the session is gone."""

    request_id: int
    code: str
    message: str
    fatal: bool = False

    KIND: ClassVar[str] = "game_error"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {
        "request_id": framing.count,
        "code": framing.string,
        "message": framing.string,
        "fatal": framing.boolean,
    }


@dataclass(frozen=True)
class GameBye(HeaderOnly, GameMessage):
    """Game -> server: the game is leaving; its open episodes end here (truncated). No reply."""

    request_id: int = 0
    reason: str = field(default="")

    KIND: ClassVar[str] = "game_bye"
    FIELDS: ClassVar[Mapping[str, framing.Checker]] = {"request_id": framing.count, "reason": framing.string}


GAME_MESSAGES: dict[str, type] = {
    cls.KIND: cls for cls in (GameHello, GameWelcome, GameStep, GameAction, GameError, GameBye)
}


def decode_game(frames: Sequence[Any], limits: Limits = GAME_LIMITS) -> Any:
    """Any game message; raises ProtocolError (and nothing else) for anything malformed or of another kind."""
    header, views = framing.decode_header(frames, limits)
    cls = GAME_MESSAGES.get(header["kind"])
    if cls is None:
        raise ProtocolError(f"not a game message (kinds: {', '.join(GAME_KINDS)})", "kind")
    return cls.from_header(header, views, limits)  # the header is read once
