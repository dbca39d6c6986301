"""An action server's games and their streams: sessions, strict checks of each step, unrolls; no sockets here."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from tandem.daemons.actor.serve.entity_steps import checked_entities
from tandem.daemons.envs.entity_rows import EntityRows
from tandem.daemons.envs.entity_spaces import EntityLayout, is_entity_policy, layout_json, padded_layout
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.envs.streams import AgentStream
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.protocol import TransitionBatch
from tandem.protocol.framing import wire_array
from tandem.protocol.game import GameHello, GameSpaces, GameStep

MAX_UNREPORTED_EPISODES = 1000
# A batch waits only for streams that stepped this recently: a game gone without a bye (or one that steps
# rarely) would otherwise hold every other game's request for the whole batch wait until it timed out.
# Nor does it wait for a stream whose last step ended an episode: its game, answered at once, may well wait
# for its other streams' actions before it starts the next episode (a game stepping several in lock-step).
AWAIT_RECENT_S = 0.25
# A batch still short of its awaited streams goes once no step has come for this share of the batch wait:
# games whose steps hang together (several driven in lock-step by one process) wait on each other's actions,
# which no waiting on the server's side can bring, and a late one is better answered in the next batch.
QUIET_SHARE = 0.25


class StepRefused(Exception):
    """A game's message that is refused: `code` (PROTOCOL.md 7.2) and `fatal` (the session is gone)."""

    def __init__(self, code: str, message: str, fatal: bool = False):
        super().__init__(message)
        self.code, self.fatal = code, fatal


def game_spaces(spaces: PolicySpaces, layout: EntityLayout | None = None) -> GameSpaces:
    """The spaces a game must match, from the policy's (a Box observation; Discrete or Box actions; or entities,
    laid out as `layout` where the caller has it)."""
    obs, act = spaces.observation_space, spaces.action_space
    if is_entity_policy(act):  # hybrid actions (a Box head) travel as float32 slots
        dtype = np.dtype(act.dtype).str
        if layout is None:
            layout = padded_layout(obs, act)
        return GameSpaces((), "<f4", "entities", 0, (), dtype, entities=layout_json(layout))
    if spaces.mask_size or not isinstance(obs, gym.spaces.Box):
        raise ValueError(f"actors.mode = 'serve' needs a Box observation space, got {obs}")
    obs_dtype = wire_array("obs", np.zeros((), obs.dtype)).dtype.str  # as it travels: little-endian
    if isinstance(act, gym.spaces.Discrete):
        return GameSpaces(tuple(obs.shape), obs_dtype, "discrete", int(act.n), (), "<i8")
    if isinstance(act, gym.spaces.Box):
        return GameSpaces(tuple(obs.shape), obs_dtype, "box", 0, tuple(act.shape), np.dtype(act.dtype).str)
    raise ValueError(f"actors.mode = 'serve' needs a Discrete or Box action space, got {act}")


@dataclass
class Request:
    """A step waiting for its action."""

    session: bytes
    stream: int
    request_id: int
    obs: np.ndarray
    received_at: float


@dataclass
class Stream:
    id: int
    record: AgentStream
    pending: Request | None = None
    episode_return: float = 0.0
    episode_length: int = 0
    last_step: float = 0.0
    awaited: bool = True  # counted in GameStreams.awaited: it stepped lately, and not to end an episode


@dataclass
class Session:
    """One connected game (a ROUTER identity) and the streams its hello opened."""

    identity: bytes
    game: str
    streams: dict[int, Stream]
    last_seen: float
    errors: dict[str, int] = field(default_factory=dict)


class GameStreams:
    """Every game's session and stream; what the actor daemon's `stepping` is in serve mode.

    Each stream is an AgentStream (K=1 unrolls, as a multi-agent actor's), named `<server>/g<id>`: a game
    that reconnects says hello again and gets fresh stream ids, so no unroll ever holds two connections.
    Ids come from `ids` (this life's reservation, stream_ids.py): no restart of the server hands one out again.
    A step still waiting when its session ends goes to `cancelled`, for the server to answer.
    """

    multi_agent = False

    def __init__(
        self,
        spaces: PolicySpaces,
        server_name: str,
        incarnation: int,
        unroll_length: int,
        max_streams: int,
        return_window: int = 100,
        ids: range = range(1, 1 << 63),
        state_size: int = 0,
    ):
        self.spaces = {DEFAULT_POLICY: spaces}
        # an entity game's observations are padded here, and its actions laid out per head (PROTOCOL.md 7.6)
        layout = padded_layout(spaces.observation_space, spaces.action_space) if (
            is_entity_policy(spaces.action_space)
        ) else None  # fmt: skip
        self.wire_spaces = game_spaces(spaces, layout)
        self.entity_rows = EntityRows(layout) if layout is not None else None
        self.action_dtype = np.dtype(self.wire_spaces.action_dtype)
        self.server_name, self.incarnation, self.unroll_length = server_name, incarnation, unroll_length
        self.max_streams = max_streams
        self.state_size = state_size  # a recurrent policy's state per stream (0: feed-forward)
        self.sessions: dict[bytes, Session] = {}
        self.open_streams = 0
        self.awaited = 0  # streams a batch waits for (Stream.awaited): stepped within AWAIT_RECENT_S, no episode end
        self.last_step_at = 0.0  # when the latest step came (any stream)
        self.ids, self.next_id = ids, ids.start
        self.pending: list[Request] = []
        self.cancelled: list[Request] = []  # steps whose session ended before their action: each still owed a reply
        self.outbox: list[TransitionBatch] = []
        self.new_episodes: list[tuple[str | None, float, int]] = []
        self.finished: deque[float] = deque(maxlen=return_window)
        self.env_steps = 0
        self.episodes = 0
        self.counts = {
            "games_joined": 0,
            "games_left": 0,
            "games_timed_out": 0,
            "episodes_cut": 0,
            "steps_discarded": 0,
            "steps_cancelled": 0,
        }

    def __len__(self) -> int:
        return self.open_streams

    # ------------------------------------------------------------------ sessions

    def hello(self, identity: bytes, hello: GameHello, now: float) -> list[int]:
        """Open a session (ending one this identity had); the new stream ids, or StepRefused."""
        if identity in self.sessions:
            self.end(identity, "games_left")
        if hello.spaces is not None and (diff := hello.spaces.differences(self.wire_spaces)):
            raise StepRefused("space_mismatch", "the game's spaces differ from the server's: " + "; ".join(diff), True)
        if self.open_streams + hello.streams > self.max_streams:
            raise StepRefused("server_busy", f"{self.open_streams} streams are open, at most {self.max_streams}", True)
        if self.next_id + hello.streams > self.ids.stop:
            raise StepRefused(
                "server_busy",
                f"this server has handed out every stream id of its life ({len(self.ids)}); a restart reserves more",
                True,
            )
        streams = {}
        for sid in range(self.next_id, self.next_id + hello.streams):
            streams[sid] = Stream(
                sid,
                AgentStream(f"{self.server_name}/g{sid}", self.unroll_length, self.action_dtype, self.state_size),
                last_step=now,
            )
        self.next_id += hello.streams
        self.sessions[identity] = Session(identity, hello.game, streams, now)
        self.open_streams += len(streams)
        self.awaited += len(streams)  # a new game is about to step
        self.counts["games_joined"] += 1
        return list(streams)

    def seen(self, identity: bytes, now: float) -> None:
        """Something came from this connection (readable or not): it is not silent."""
        session = self.sessions.get(identity)
        if session is not None:
            session.last_seen = now

    def end(self, identity: bytes, reason: str) -> None:
        """The game left (bye), went silent or said hello again: its open episodes end here.

        The steps since a stream's last full unroll are dropped (counted), so the learner never gets an
        unroll cut short; the stream id is never used again. A step still waiting for its action moves to
        `cancelled`: it gets no action, but it still gets its one reply."""
        session = self.sessions.pop(identity, None)
        if session is None:
            return
        self.counts[reason] += 1
        for stream in session.streams.values():
            if stream.episode_length:  # an episode in progress (not one that just ended)
                self.counts["episodes_cut"] += 1
            self.counts["steps_discarded"] += len(stream.record.actions)
        self.open_streams -= len(session.streams)
        self.awaited -= sum(st.awaited for st in session.streams.values())
        waiting = [r for r in self.pending if r.session == identity]
        if waiting:
            self.pending = [r for r in self.pending if r.session != identity]
            self.cancelled.extend(waiting)
            self.counts["steps_cancelled"] += len(waiting)

    def expire(self, now: float, timeout_s: float) -> list[bytes]:
        """End every session silent for `timeout_s` with nothing waiting on the server; their identities.

        Also stops waiting for streams that have not stepped within AWAIT_RECENT_S."""
        gone = [
            s.identity
            for s in self.sessions.values()
            if now - s.last_seen > timeout_s and not any(st.pending for st in s.streams.values())
        ]
        for identity in gone:
            self.end(identity, "games_timed_out")
        recent = now - AWAIT_RECENT_S
        for session in self.sessions.values():
            for stream in session.streams.values():
                if stream.awaited and stream.last_step < recent:
                    stream.awaited = False
                    self.awaited -= 1
        return gone

    # ------------------------------------------------------------------ steps

    def step(self, identity: bytes, step: GameStep, now: float) -> bool:
        """Record a checked step; True when it waits for an action, False when it ended an episode."""
        session = self.sessions.get(identity)
        if session is None:
            raise StepRefused(
                "no_session",
                "no open session: send game_hello first (sessions end after a bye or "
                "a silence longer than the server's timeout)",
                True,
            )
        session.last_seen = now
        stream = session.streams.get(step.stream)
        if stream is None:
            raise StepRefused(
                "unknown_stream",
                f"stream {step.stream} is not one of this session's ({', '.join(map(str, session.streams))})",
            )
        stream.last_step = self.last_step_at = now
        if not stream.awaited:
            stream.awaited = True
            self.awaited += 1
        if stream.pending is not None:
            raise StepRefused(
                "busy", f"stream {step.stream} already waits for the action of request {stream.pending.request_id}"
            )
        obs = self.checked_obs(step.obs)
        record = stream.record
        if step.done or step.truncated:
            if not record.awaiting_outcome:
                raise StepRefused("no_action_pending", f"stream {step.stream} ended an episode it has no action in")
            record.outcome(
                step.reward,
                step.done,
                step.truncated and not step.done,
                obs if step.truncated and not step.done else None,
            )
            self.episode_end(stream, step.reward)
            stream.awaited = False  # its next step (a new episode) may wait for the actions of this batch
            self.awaited -= 1
            return False
        if record.awaiting_outcome:
            record.outcome(step.reward, False, False, None)
            stream.episode_return += step.reward
        record.observe(obs)
        if record.ready():
            self.outbox.append(record.take(DEFAULT_POLICY, self.incarnation, self.env_steps))
        request = Request(identity, stream.id, step.request_id, obs, now)
        stream.pending = request
        self.pending.append(request)
        return True

    def checked_obs(self, obs: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        if self.entity_rows is not None:
            try:
                return checked_entities(self.entity_rows, obs)
            except ValueError as exc:
                raise StepRefused("bad_obs", str(exc)) from exc
        if isinstance(obs, dict):
            raise StepRefused("bad_obs", f"obs must be one array, {self.wire_spaces.obs_dtype} "
                              f"{list(self.wire_spaces.obs_shape)}; got the arrays {sorted(obs)}")  # fmt: skip
        want = self.wire_spaces
        if obs.dtype.str != want.obs_dtype or tuple(obs.shape) != want.obs_shape:
            raise StepRefused(
                "bad_obs", f"obs must be {want.obs_dtype} {list(want.obs_shape)}, got {obs.dtype.str} {list(obs.shape)}"
            )
        if obs.dtype.kind == "f" and not np.isfinite(obs).all():
            raise StepRefused("bad_obs", "obs holds NaN or infinite values")
        return obs.copy()  # the received frame's buffer is not ours to keep

    def episode_end(self, stream: Stream, reward: float) -> None:
        ret = stream.episode_return + reward
        self.finished.append(ret)
        self.new_episodes.append((None, ret, stream.episode_length))
        del self.new_episodes[:-MAX_UNREPORTED_EPISODES]
        self.episodes += 1
        stream.episode_return, stream.episode_length = 0.0, 0

    def stream_of(self, request: Request) -> Stream | None:
        """The stream `request` waits on, or None when its session or stream ended meanwhile."""
        session = self.sessions.get(request.session)
        stream = session.streams.get(request.stream) if session else None
        return stream if stream is not None and stream.pending is request else None

    def states(self, batch: list[Request]) -> np.ndarray | None:
        """A recurrent policy's states [B, S] for the requests' streams (zeros for one gone meanwhile); else None."""
        if not self.state_size:
            return None
        out = np.zeros((len(batch), self.state_size), np.float32)
        for j, request in enumerate(batch):
            stream = self.stream_of(request)
            if stream is not None:
                out[j] = stream.record.state
        return out

    def acted(
        self,
        request: Request,
        action: np.ndarray,
        version: int,
        extras: dict[str, np.ndarray],
        state: np.ndarray | None = None,
    ) -> bool:
        """The action chosen for `request` (and a recurrent policy's state after it); False when its session or
        stream ended meanwhile."""
        stream = self.stream_of(request)
        if stream is None:
            return False
        if state is not None:
            stream.record.state[:] = state
        stream.pending = None
        stream.record.acted(action, version, extras)
        stream.episode_length += 1
        self.env_steps += 1
        return True

    def take_batch(self, max_batch: int) -> list[Request]:
        batch, self.pending = self.pending[:max_batch], self.pending[max_batch:]
        return batch

    def due(self, now: float, wait_s: float, max_batch: int) -> bool:
        """Act now: a full batch, every awaited stream waiting (no one else is likely to add to it), no step for
        QUIET_SHARE of the wait, or the oldest waited `wait_s`."""
        pending = len(self.pending)
        return pending > 0 and (pending >= max_batch or pending >= self.awaited or now >= self.due_at(wait_s))

    def due_at(self, wait_s: float) -> float:
        """When the waiting batch goes at the latest (no more steps coming in); inf with nothing waiting."""
        if not self.pending:
            return float("inf")
        return min(self.pending[0].received_at + wait_s, self.last_step_at + QUIET_SHARE * wait_s)

    def recent_return_mean(self) -> float | None:
        return float(np.mean(self.finished)) if self.finished else None

    def agent_returns(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        for identity in list(self.sessions):
            self.end(identity, "games_left")
