"""An action server in the test's process, over real sockets: a stand-in learner link, a clock the test moves."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from tandem.daemons.actor.serve import server as server_module
from tandem.daemons.actor.serve.server import GameServer
from tandem.daemons.config import config_from_dict
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.protocol import sockets
from tandem.protocol.game import GameHello, GameWelcome, decode_game

SPACES = PolicySpaces((), gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2), 0)
OBS = np.zeros(4, np.float32)
TIMEOUT_S = 10.0  # the server's silence timeout (on the test's clock, which only moves when told)
WAIT_S = 5.0  # the longest any wait here takes on the real clock


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeLink:
    """The learner side of a serving actor: version 7, always action 0, keeps what it is pushed."""

    version = 7

    def __init__(self) -> None:
        self.net, self.pushed = self, []
        self.followed = self  # never silent: the server's follow() has no learner to look up
        self.batches: list[int] = []  # the size of each inference

    def explore(self, obs: np.ndarray, eps: np.ndarray):
        self.batches.append(len(obs))
        return np.zeros(len(obs), np.int64), {}

    def poll_weights(self) -> bool:
        return False

    def silent_s(self, now: float) -> float:
        return 0.0

    def push(self, batch) -> None:
        self.pushed.append(batch)

    def flush(self) -> None:
        pass


@pytest.fixture
def make_server(tmp_path, monkeypatch):
    """Builds servers of one run directory (a second one is a restart); closes them all afterwards."""
    monkeypatch.setattr(server_module, "probe_policy_spaces", lambda config: SPACES)
    made = []

    def make(clock: Clock | None = None, bind: bool = True, run_dir: str | None = None, **serve) -> GameServer:
        """`serve`: keys of [actors.serve] besides the harness's own (`bind_address` for its `bind`, as `bind` here
        says whether the server binds at all)."""
        if "bind_address" in serve:
            serve["bind"] = serve.pop("bind_address")
        config = config_from_dict(
            {
                "run": {"dir": run_dir or str(tmp_path / "run")},
                "eval": {"enabled": False},
                "actors": {"mode": "serve", "serve": {"timeout_s": TIMEOUT_S, "batch_wait_ms": 2.0, **serve}},
            }
        )
        server = GameServer(config, 0, StopFlag(), None)
        made.append(server)
        if clock is not None:
            server.clock = clock
        server.games = server.build()
        server.links.add(DEFAULT_POLICY, FakeLink())
        if bind:
            server.bind()
        return server

    yield make
    for server in made:
        server.stop.requested = True
        if (thread := getattr(server, "thread", None)) is not None:
            thread.join(WAIT_S)
        if server.router is not None and not server.router.closed:
            sockets.close(server.router, linger_ms=0)
        sockets.close_context(server.runtime.ctx, linger_ms=0)


class Game:
    """A game speaking the protocol by hand over a real DEALER."""

    def __init__(self, ctx, endpoint: str):
        self.sock = sockets.game_dealer(ctx, endpoint)

    def send(self, message_or_frames) -> None:
        frames = message_or_frames if isinstance(message_or_frames, list) else message_or_frames.to_frames()
        assert sockets.send_frames(self.sock, frames, timeout_ms=int(WAIT_S * 1000))

    def received(self) -> list:
        out = []
        while (frames := sockets.recv_frames(self.sock, 0)) is not None:
            out.append(decode_game(frames))
        return out


def pump(server: GameServer, games: list[Game], until, wait_s: float = WAIT_S) -> list[list]:
    """Run the server and collect each game's messages until `until(collected)` holds (at most wait_s)."""
    collected: list[list] = [[] for _ in games]
    deadline = time.monotonic() + wait_s
    while not until(collected):
        assert time.monotonic() < deadline, f"still waiting after {wait_s} s; got {collected}"
        server.serve_once(server.clock())
        for got, game in zip(collected, games):
            got.extend(game.received())
    return collected


def settle(server: GameServer, games: list[Game], seconds: float = 0.3) -> list[list]:
    """Everything that comes in the next `seconds` (to show that nothing more comes)."""
    end = time.monotonic() + seconds
    return pump(server, games, lambda _: time.monotonic() >= end, wait_s=seconds + WAIT_S)


def hello(server: GameServer, game: Game, request_id: int, streams: int = 1) -> list[int]:
    game.send(GameHello(request_id, "g", streams))
    welcome = pump(server, [game], lambda got: got[0])[0][0]
    assert isinstance(welcome, GameWelcome) and welcome.request_id == request_id, welcome
    return welcome.streams


def replies_to(messages: list, request_id: int) -> list:
    return [m for m in messages if getattr(m, "request_id", None) == request_id]


def serve_in_thread(server: GameServer) -> threading.Thread:
    """`server.act()` (bind, serve until its stop flag, close) on a thread of its own, for games that block."""
    thread = server.thread = threading.Thread(target=server.act, name="game-server", daemon=True)
    thread.start()
    return thread
