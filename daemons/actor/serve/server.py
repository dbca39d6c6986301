"""The action server: an actor whose envs are game processes; it batches their steps into one inference each."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from tandem.daemons.actor.exploration import actor_epsilons, decayed
from tandem.daemons.actor.pacing import Pacing
from tandem.daemons.actor.process import ActorProcess
from tandem.daemons.actor.report import ActorReport
from tandem.daemons.actor.serve.stats import ServeStats, server_counters
from tandem.daemons.actor.serve.stream_ids import reserve_stream_ids, stream_ids_file
from tandem.daemons.actor.serve.streams import GameStreams, StepRefused
from tandem.daemons.actor.warmup import UniformActions, explore_or_warm_up, uniform_warmup
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.envs.spaces import env_actions
from tandem.daemons.runtime.endpoints import is_loopback, socket_options
from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.runtime.serve_address import endpoint_file, serve_endpoint
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import game_socket, keyed, sockets
from tandem.protocol.game import (
    GAME_LIMITS,
    GameAction,
    GameBye,
    GameError,
    GameHello,
    GameStep,
    GameWelcome,
)
from tandem.protocol.game_plain import action_frames
from tandem.protocol.game_requests import BadRequest, decode_request

log = logging.getLogger(__name__)
EPSILON_SLOTS = 16  # (dqn) Ape-X epsilons spread over this many slots; stream id s explores with slot s % 16
DRAIN_MAX = 4096  # most messages read before the server acts on what it has (a flood cannot starve inference)
IDLE_POLL_S = 0.02  # with nothing waiting: how long one wait may block (heartbeats, weights, expiry go on)
EXPIRE_EVERY_S = 0.1
# Weights are looked for at most this often: a look costs several socket polls, too many to pay on every
# request of a fast game, and a version arrives every few milliseconds at most.
WEIGHTS_POLL_S = 0.005
MIN_FRAME_CAP_BYTES = 4 << 20
# How long the closing socket may spend handing the shutdown notices to games (a game not reading loses its own).
SHUTDOWN_LINGER_MS = 500
SHUTDOWN_MESSAGE = (
    "the action server is stopping (a restart or the end of the run): read the endpoint file again for its successor"
)


class GameServer(ActorProcess):
    """An actor in `actors.mode = 'serve'`: binds a ROUTER that games connect to and answers their steps.

    Requests wait at most `actors.serve.batch_wait_ms` for a fuller batch; one inference answers them all with the
    newest weights. Each stream's steps become unrolls pushed through the same LearnerLinks (backlog, joins,
    drops, versions) as an env-stepping actor's, and reported the same way. Bad input is refused with a
    game_error, counted by code. Every step gets exactly one reply; on the way out every session gets a
    `shutdown` notice.
    """

    def __init__(
        self,
        config: RunConfig,
        index: int,
        stop: StopFlag,
        control_endpoint: str | None,
        insecure: bool = False,
        fixed: Any = None,
    ):
        if config.policies:
            raise ValueError("actors.mode = 'serve' plays one policy; remove the [policies] sections")
        super().__init__(config, index, stop, control_endpoint)
        self.insecure = insecure
        # Games set their own pace: never advised, it reports no limit and no time waited, as an unpaced actor.
        self.reports = ActorReport(
            self.runtime,
            self.links,
            Pacing(following=False),
            lambda now: server_counters(self.stats, self.games, self.endpoint, now),
        )
        self.games: Any = None  # GameStreams, once built
        self.router: Any = None
        self.endpoint = ""
        self.stats = ServeStats()
        a = config.actors
        self.wait_s = a.serve.batch_wait_ms / 1000.0
        self.max_batch, self.timeout_s = a.serve.max_batch, a.serve.timeout_s
        self.base_eps = actor_epsilons(a.explore.epsilon, a.explore.epsilon_alpha, index, a.count, EPSILON_SLOTS)
        self.epsilons = self.base_eps
        self.next_expire = 0.0
        self.next_weights_poll = 0.0
        self.warmup: UniformActions | None = None
        self.clock = time.monotonic  # tests drive a server's time (silence, expiry) without sleeping
        # a policy served with its weights fixed (`tandem serve`, frozen.py): its links, spaces and status line
        self.fixed = fixed
        if fixed is not None:
            self.links = fixed.links
            self.reports = fixed.status(self)

    def main(self) -> None:
        self.start()
        self.runtime.reporter.set_stage("running")
        self.act()

    def keep(self, built: GameStreams) -> None:
        self.games = built

    def build(self) -> GameStreams:
        self.runtime.reporter.set_stage("probe_spaces")
        spaces = self.fixed.spaces if self.fixed is not None else probe_policy_spaces(self.config)
        a, name = self.config.actors, self.runtime.name
        ids = reserve_stream_ids(stream_ids_file(self.config, name))
        return GameStreams(
            spaces,
            name,
            self.runtime.reporter.incarnation,
            a.unroll_length,
            a.serve.max_streams,
            ids=ids,
            state_size=self.config.model.core_state_size(),
        )

    def bind(self) -> None:
        path = endpoint_file(self.config, self.runtime.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        endpoint = serve_endpoint(self.config.actors.serve.bind, self.index, path.parent)
        if not is_loopback(endpoint) and not self.insecure:
            raise ValueError(
                f"binding {endpoint} exposes the action server beyond this machine; the game socket has "
                "no CurveZMQ yet (games would need keys too), so such a bind needs --insecure"
            )
        # A larger frame disconnects its sender unanswered (ZeroMQ drops it before we see a byte); below this,
        # a wrong-sized observation is answered bad_obs. The cap bounds what one game's queue can hold.
        obs_bytes = keyed.nbytes(self.games.spaces[DEFAULT_POLICY].observation_space.sample())
        limit = max(MIN_FRAME_CAP_BYTES, GAME_LIMITS.max_header_bytes + 4 * obs_bytes)
        self.router = sockets.game_router(self.runtime.ctx, endpoint, limit, opts=socket_options(self.config))
        self.endpoint = sockets.bound_endpoint(self.router)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.endpoint + "\n")
        tmp.replace(path)  # a game never reads half an address
        log.info(
            "serving games at %s (written to %s)%s",
            self.endpoint,
            path,
            "" if is_loopback(endpoint) else " (INSECURE: no authentication)",
        )

    def act(self) -> None:
        space = self.games.spaces[DEFAULT_POLICY].action_space
        # uniform actions while the weights are the untrained version 0, as an env-stepping actor does (SAC)
        self.warmup = UniformActions(space, self.config.run.seed + self.index) if uniform_warmup(self.config) else None
        self.bind()
        try:
            while not self.stop:
                self.serve_once(self.clock())
        finally:
            self.close_games()

    def close_games(self) -> None:
        """The server goes: every waiting step and every session gets a fatal `shutdown`, then the socket closes.

        The endpoint file goes first, so a game told to look again never finds this server's address."""
        endpoint_file(self.config, self.runtime.name).unlink(missing_ok=True)
        games = self.games
        for request in games.pending:
            self.notify(request.session, request.request_id, "shutdown", SHUTDOWN_MESSAGE, True)
        for identity in games.sessions:
            self.notify(identity, 0, "shutdown", SHUTDOWN_MESSAGE, True)
        if games.sessions:
            log.info("told %d games that this server stops", len(games.sessions))
        games.close()
        games.cancelled.clear()  # answered above with `shutdown`
        sockets.close(self.router, linger_ms=SHUTDOWN_LINGER_MS)
        if self.endpoint.startswith("ipc://"):  # ZeroMQ removes its socket file too; a run leaves none behind
            Path(self.endpoint.removeprefix("ipc://")).unlink(missing_ok=True)

    def serve_once(self, now: float) -> None:
        """Wait (bounded) for messages, read what waits until a batch is due, answer every due batch, then the
        chores: silent games, new weights, unrolls to the learner, the heartbeat."""
        games, link = self.games, self.links[DEFAULT_POLICY]
        timeout_s = min(IDLE_POLL_S, games.due_at(self.wait_s) - now)
        first = None
        if not games.pending:
            # No batch waits: sleep inside ZeroMQ until a step comes (its millisecond grain only bounds the chores'
            # pace); with one game this wait is every frame's, and a Python loop around it cost a game frames/s.
            first = game_socket.recv_within(self.router, timeout_s)
            ready = first is not None
        else:  # a batch waits for more steps until a deadline a fraction of a millisecond away
            ready = timeout_s <= 0 or game_socket.wait_readable(self.router, timeout_s)
        if ready:
            for _ in range(DRAIN_MAX):
                frames, first = first or game_socket.recv_now(self.router), None
                if frames is None:
                    break
                self.handle(frames, self.clock())
                if games.due(self.clock(), self.wait_s, self.max_batch):
                    break
        now = self.clock()
        while games.due(now, self.wait_s, self.max_batch):
            self.infer()
            now = self.clock()
        if now >= self.next_expire:
            self.next_expire = now + EXPIRE_EVERY_S
            for identity in games.expire(now, self.timeout_s):
                log.info("a game went silent for %.1f s: its episodes end here", self.timeout_s)
                self.notify(identity, 0, "timeout", f"silent for over {self.timeout_s:g} s", True)
        if now >= self.next_weights_poll:
            self.next_weights_poll = now + WEIGHTS_POLL_S
            if link.poll_weights():  # AgentStream keeps the oldest version of each unroll: lag is never understated
                self.epsilons = decayed(self.base_eps, games.env_steps, self.config.actors.explore.epsilon_decay_steps)
            self.links.follow()  # a learner restarted elsewhere (other ports, another host) is followed, as actors do
        self.links.push(games.outbox)
        self.links.flush()
        self.report()

    # ------------------------------------------------------------------ messages

    def handle(self, frames: list, now: float) -> None:
        if len(frames) < 2:
            return  # a ROUTER always prepends the identity; an empty message has nothing to answer
        identity, body = bytes(frames[0]), frames[1:]
        games = self.games
        games.seen(identity, now)  # a game sending only garbage is alive: refused, not timed out for silence
        try:
            message = decode_request(body, GAME_LIMITS)
        except BadRequest as bad:
            self.refuse(identity, bad.request_id, StepRefused(bad.code, str(bad)))
            return
        try:
            if isinstance(message, GameStep):
                if not games.step(identity, message, now):
                    # an episode's end: no action was chosen; the version is the one that would act next
                    self.reply(
                        identity, GameAction(message.request_id, message.stream, self.links[DEFAULT_POLICY].version)
                    )
            elif isinstance(message, GameHello):
                ids = games.hello(identity, message, now)
                log.info("game %r joined with streams %s", message.game, ids)
                self.reply(
                    identity, GameWelcome(message.request_id, ids, games.wire_spaces, self.timeout_s, self.runtime.name)
                )
            elif isinstance(message, GameBye):
                games.end(identity, "games_left")
        except StepRefused as refused:
            if refused.fatal:
                games.end(identity, "games_left")
            self.refuse(identity, message.request_id, refused)
        finally:
            if games.cancelled:
                self.answer_cancelled()

    def answer_cancelled(self) -> None:
        """Steps whose session ended while they waited (a bye, a new hello) get their one reply: `cancelled`."""
        games = self.games
        for request in games.cancelled:
            self.notify(
                request.session,
                request.request_id,
                "cancelled",
                f"stream {request.stream}'s session ended before this step was answered",
                False,
            )
        games.cancelled.clear()

    def refuse(self, identity: bytes, request_id: int, refused: StepRefused) -> None:
        total = self.stats.error(refused.code)
        log_dropped(log, f"a game's message ({refused.code})", total, refused)
        self.notify(identity, request_id, refused.code, str(refused)[:500], refused.fatal)

    def notify(self, identity: bytes, request_id: int, code: str, message: str, fatal: bool) -> None:
        """Send a game_error: `refuse` counts refusals; notices and cancellations have their own counters."""
        self.reply(identity, GameError(request_id, code, message, fatal))

    def reply(self, identity: bytes, message: Any) -> None:
        self.stats.replies_dropped += game_socket.send_replies(self.router, [(identity, message.to_frames())])

    # ------------------------------------------------------------------ inference

    def infer(self) -> None:
        """One inference for the due batch, with the newest weights; each step still owed gets its action."""
        games, link = self.games, self.links[DEFAULT_POLICY]
        batch = games.take_batch(self.max_batch)
        obs = keyed.stack([r.obs for r in batch])
        eps = self.epsilons[[r.stream % EPSILON_SLOTS for r in batch]]
        states = games.states(batch)  # a recurrent policy's, advanced by the choice
        chosen, extras = explore_or_warm_up(link.net, self.warmup, link.version, obs, eps, states)
        chosen = np.asarray(chosen)
        sent = env_actions(games.spaces[DEFAULT_POLICY].action_space, chosen).astype(games.action_dtype, copy=False)
        version = link.version
        done = time.monotonic()
        owed = [  # a step whose session ended meanwhile was answered `cancelled`
            j
            for j, request in enumerate(batch)
            if games.acted(
                request,
                chosen[j],
                version,
                {name: values[j] for name, values in extras.items()} if extras else {},
                None if states is None else states[j],
            )
        ]
        if owed and games.entity_rows is not None:  # one array a head, for the entities the game sent (7.6)
            rows = games.entity_rows
            frames = [
                GameAction(
                    batch[j].request_id, batch[j].stream, version, per_head(rows.env_action(sent[j], batch[j].obs))
                ).to_frames()
                for j in owed
            ]
        elif owed:
            frames = action_frames(
                [batch[j].request_id for j in owed],
                [batch[j].stream for j in owed],
                version,
                sent if len(owed) == len(batch) else sent[owed],
            )
        if owed:
            self.stats.replies_dropped += game_socket.send_replies(
                self.router, zip([batch[j].session for j in owed], frames)
            )
        self.stats.batch(len(batch), [r.received_at for r in batch], done)

    # ------------------------------------------------------------------ reporting

    def report(self, force: bool = False) -> None:
        """Counters into the next heartbeat; finished episodes to the supervisor; never blocks."""
        self.reports.send(self.games, force)


def per_head(action: dict) -> dict[str, np.ndarray]:
    """An entity env's action (an int per global head, an array per entity head, floats per Box head) as the
    arrays a game gets: <i8, and <f4 for a Box head."""
    return {
        head: np.asarray(value, np.float32 if np.asarray(value).dtype.kind == "f" else np.int64).reshape(-1)
        for head, value in action.items()
    }
