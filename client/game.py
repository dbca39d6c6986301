"""The game side of an action server: `Agent(endpoint).act(obs, reward, done)` from a game's own loop; no torch.

Everything happens in the caller's thread, inside its calls (ZeroMQ's own I/O thread aside): no Tandem
thread runs in a game. Every call waits at most `timeout_s`.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np

from tandem.protocol import ProtocolError, game_socket, sockets
from tandem.protocol.game import GameAction, GameBye, GameError, GameHello, GameSpaces, GameStep, GameWelcome
from tandem.protocol.game_plain import decode_reply

RUN_OVER_POLL_S = 0.1


class AgentError(RuntimeError):
    """The server refused a request (`code` as PROTOCOL.md 7.2 lists them); `fatal`: the session is gone."""

    def __init__(self, code: str, message: str, fatal: bool = False):
        super().__init__(f"{code}: {message}")
        self.code, self.fatal = code, fatal


class ServerGone(AgentError):
    """No answer within the timeout (the server is gone, stalled or unreachable), or the session ended."""

    def __init__(self, message: str):
        super().__init__("server_gone", message, True)


def endpoint_path(run_dir: str | Path, actor: int = 0) -> Path:
    """The file holding the address serving actor `actor` bound (PROTOCOL.md 7.5)."""
    return Path(run_dir) / "games" / f"actor-{actor}.endpoint"


def read_endpoint(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def find_endpoint(run_dir: str | Path, actor: int = 0, timeout_s: float = 60.0) -> str:
    """The address serving actor `actor` of the run in `run_dir` bound (waits for its file up to `timeout_s`)."""
    path = endpoint_path(run_dir, actor)
    deadline = time.monotonic() + timeout_s
    while (text := read_endpoint(path)) is None:
        if time.monotonic() >= deadline:
            raise ServerGone(f"no action server wrote {path} within {timeout_s:g} s (is `tandem up` running?)")
        time.sleep(RUN_OVER_POLL_S)
    return text


def find_endpoint_again(run_dir: str | Path, actor: int = 0, timeout_s: float = 60.0) -> str | None:
    """After the server went away (a `shutdown` notice, a ServerGone): its successor's address, or None when
    the run is over.

    A stopping server removes its endpoint file before it tells its games; a restarted one writes a new one.
    The run is over when the run's own `endpoint` file (the supervisor's, removed when `tandem up` ends) is
    gone while no server's is there. Raises ServerGone when neither happens within `timeout_s`.
    """
    path, supervisor = endpoint_path(run_dir, actor), Path(run_dir) / "endpoint"
    deadline = time.monotonic() + timeout_s
    while (text := read_endpoint(path)) is None:
        if not supervisor.exists():
            return None
        if time.monotonic() >= deadline:
            raise ServerGone(f"no action server wrote {path} within {timeout_s:g} s, and the run has not ended")
        time.sleep(RUN_OVER_POLL_S)
    return text


def entity_arrays(spaces: GameSpaces, obs: Any) -> dict[str, np.ndarray]:
    """An entity game's observation (PROTOCOL.md 7.6) as the arrays a step carries: each type's rows [n, F] and the
    global features as float32, each mask as uint8."""
    if not isinstance(obs, dict):
        raise ValueError("this server takes entity observations: a dict of entity types, 'global' and masks")
    features = {name: int(f) for name, f, _ in spaces.entities["types"]}
    out = {}
    for key, value in obs.items():
        if key in features:
            rows = np.ascontiguousarray(value, np.float32)
            out[key] = rows.reshape(len(rows) if rows.ndim else 0, features[key])  # (a type may have no features)
        elif ":" in key:
            out[key] = np.ascontiguousarray(value, np.uint8)
        else:
            out[key] = np.ascontiguousarray(value, np.float32)
    return out


def head_actions(spaces: GameSpaces, action: Any) -> dict[str, Any]:
    """The reply's arrays as one action per head: an int for a global head, float32 values for a Box head, an
    int64 array with one entry per present actor entity (-1 where it does not act) for the others."""
    if not isinstance(action, dict):
        raise AgentError("bad_reply", "expected one action array per head")
    kinds = {h["name"]: h["kind"] for h in spaces.entities["heads"]}
    if set(action) != set(kinds):
        raise AgentError("bad_reply", f"actions for heads {sorted(action)}, expected {sorted(kinds)}")
    if any(kinds[name] == "global" and a.size != 1 for name, a in action.items()):
        raise AgentError("bad_reply", "a global head's action must be one value")
    return {
        name: int(a[0]) if kinds[name] == "global" else a.astype(np.float32 if kinds[name] == "box" else np.int64)
        for name, a in action.items()
    }


class Agent:
    """One env stream of a game (or several: `streams`, one per seat of a board game), served by an action server.

    `act(obs, reward, done, truncated)`: `reward`, `done` and `truncated` are the outcome of the previous
    action. While the episode goes on it returns the next action (an int for a discrete space, an array
    for a box). When `done` or `truncated` is set, `obs` is the episode's last observation and it returns
    None; the next `act` starts a new episode with its first observation. `close()` (or `game_over()`)
    tells the server the game leaves. After a ServerGone, or a fatal AgentError (code `shutdown`: the server
    stops, `timeout`, ...), the agent is closed: make a new one (a new stream), at the address
    `find_endpoint_again` gives after a server went away (None: the run is over, stop).

    A game with several seats opens one stream per seat in one session (`streams=2`, then `act(..., stream=1)`
    for the second seat's step): the server then counts one game, as there is, not one per seat.
    """

    def __init__(
        self,
        endpoint: str,
        game: str = "game",
        timeout_s: float = 10.0,
        spaces: GameSpaces | None = None,
        streams: int = 1,
    ):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if streams < 1:
            raise ValueError(f"streams must be >= 1, got {streams}")
        self.endpoint, self.timeout_s = endpoint, timeout_s
        self.ids = itertools.count(1)
        self.ctx = sockets.new_context()
        self.sock: Any = None
        try:
            self.sock = sockets.game_dealer(self.ctx, endpoint)
            welcome = self.request(GameHello(next(self.ids), game, streams, spaces))
        except BaseException:
            self.close()
            raise
        if not isinstance(welcome, GameWelcome):
            self.close()
            raise AgentError("bad_reply", f"expected a game_welcome, got {welcome.KIND}", True)
        if len(welcome.streams) != streams:
            self.close()
            opened = len(welcome.streams)
            raise AgentError("bad_reply", f"asked for {streams} streams, the server opened {opened}", True)
        self.streams = list(welcome.streams)  # the server's ids, in the order of `stream` in act()
        self.stream = self.streams[0]
        self.spaces = welcome.spaces
        self.server = welcome.server
        self.obs_dtype = np.dtype(self.spaces.obs_dtype)
        self.action_size = int(np.prod(self.spaces.action_shape)) if self.spaces.action_kind == "box" else 1
        self.version = -1  # the weight version of the last action

    @property
    def closed(self) -> bool:
        return self.sock is None

    def act(self, obs: Any, reward: float = 0.0, done: bool = False, truncated: bool = False, stream: int = 0) -> Any:
        """The next action for `obs` (None when `done` or `truncated` ended the episode) of stream number `stream`
        (0 .. streams - 1); see the class."""
        if self.closed:
            raise ServerGone("this agent is closed; make a new Agent")
        if not 0 <= stream < len(self.streams):
            raise ValueError(f"stream {stream}: this agent has streams 0..{len(self.streams) - 1}")
        entities = self.spaces.action_kind == "entities"
        array = entity_arrays(self.spaces, obs) if entities else np.ascontiguousarray(obs, dtype=self.obs_dtype)
        step = GameStep(next(self.ids), self.streams[stream], array, float(reward), bool(done), bool(truncated))
        reply = self.request(step)
        if not isinstance(reply, GameAction):
            raise AgentError("bad_reply", f"expected a game_action, got {reply.KIND}")
        self.version = reply.version
        if reply.action is None:
            return None
        if entities:
            return head_actions(self.spaces, reply.action)
        if reply.action.size != self.action_size:
            raise AgentError("bad_reply", f"an action of {reply.action.size} values, expected {self.action_size}")
        if self.spaces.action_kind == "discrete":
            return int(reply.action[0])
        return reply.action.reshape(self.spaces.action_shape).copy()

    def request(self, message: Any) -> Any:
        """Send `message` and wait (at most timeout_s in all) for the reply carrying its request_id."""
        deadline = time.monotonic() + self.timeout_s
        frames = message.to_frames()
        # Each call tries first and waits only when it must: a frame's round trip is a fraction of a millisecond.
        if not game_socket.send_now(self.sock, frames):
            self.read_notices()  # a server that stopped said so (a notice queued here): no need to wait it out
            if not (game_socket.wait_writable(self.sock, self.timeout_s) and game_socket.send_now(self.sock, frames)):
                self.close(bye=False)
                raise ServerGone(f"cannot queue a request for {self.endpoint} within {self.timeout_s:g} s")
        while True:
            # The wait is ZeroMQ's own, not a loop here: it is most of a game's frame. A notice queued before
            # the reply (the server stopped) comes first and ends the wait at once.
            left_s = deadline - time.monotonic()
            frames = game_socket.recv_within(self.sock, left_s) if left_s > 0 else None
            if frames is None:
                self.close(bye=False)
                raise ServerGone(f"no reply from {self.endpoint} within {self.timeout_s:g} s")
            reply = self.decoded(frames)
            if reply is None or getattr(reply, "request_id", None) != message.request_id:
                continue  # not for us to crash on, or a late reply to an earlier request
            if isinstance(reply, GameError):
                if reply.fatal:
                    self.close(bye=False)
                raise AgentError(reply.code, reply.message, reply.fatal)
            return reply

    def read_notices(self) -> None:
        """Read what is queued without waiting; raise the first notice (request_id 0, fatal: the session is over)."""
        while (frames := game_socket.recv_now(self.sock)) is not None:
            self.decoded(frames)

    def decoded(self, frames: list) -> Any:
        """The message (None if unreadable); a notice closes the agent and raises its AgentError."""
        try:
            reply = decode_reply(frames)
        except ProtocolError:
            return None
        if isinstance(reply, GameError) and reply.fatal and reply.request_id == 0:
            self.close(bye=False)
            raise AgentError(reply.code, reply.message, True)
        return reply

    def game_over(self, reason: str = "") -> None:
        """The game leaves: its open episode ends here (the server drops its unfinished unroll)."""
        self.close(reason=reason)

    def close(self, bye: bool = True, reason: str = "") -> None:
        if self.sock is not None:
            if bye:
                sockets.send_frames(self.sock, GameBye(next(self.ids), reason).to_frames())  # best effort, no wait
            sockets.close(self.sock, linger_ms=100 if bye else 0)
            self.sock = None
        if self.ctx is not None:
            sockets.close_context(self.ctx, linger_ms=0)
            self.ctx = None

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
