"""The action server as a real process beside a real learner: games connect over real sockets, hostile ones too."""

from __future__ import annotations

import subprocess
import time

import msgpack
import numpy as np
import pytest

from tandem.client.game import Agent, AgentError, find_endpoint
from tandem.protocol import sockets
from tandem.protocol.game import (
    GameAction,
    GameError,
    GameHello,
    GameSpaces,
    GameStep,
    GameWelcome,
    decode_game,
)
from tests.example_games import build_c_game, needs_c_toolchain
from tests.system.harness import Collector, Procs, write_config

SERVER = "actor-0"
TIMEOUT_S = 1.5  # the server's silence timeout in these tests


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A learner and an action server (actors.mode = 'serve') as processes; yields (endpoint, collector)."""
    tmp = tmp_path_factory.mktemp("served")
    config, path = write_config(
        tmp,
        [
            "eval.enabled=false",
            f"actors.serve.timeout_s={TIMEOUT_S}",
            "supervisor.heartbeat_interval_s=0.2",
            "algorithm.batch_size=256",
        ],
        base="examples/game_cartpole.toml",
    )
    collector, procs = Collector(), Procs(tmp / "logs")
    try:
        procs.start("learner", "learner", str(path), "--control", collector.endpoint)
        procs.start(SERVER, "actor", str(path), "--index", "0", "--control", collector.endpoint)
        deadline = time.monotonic() + 90
        endpoint = None
        while endpoint is None and time.monotonic() < deadline:
            collector.pump()
            procs.check_alive()
            try:
                endpoint = find_endpoint(tmp / "run", timeout_s=0.1)
            except AgentError:
                pass
        assert endpoint, "the action server wrote no endpoint file within 90 s"
        yield endpoint, collector, procs, tmp
    finally:
        procs.stop_all()
        collector.close()


class RawGame:
    """A game that speaks the protocol by hand, to send what no well-behaved client would."""

    def __init__(self, endpoint: str):
        self.ctx = sockets.new_context()
        self.sock = sockets.game_dealer(self.ctx, endpoint)

    def send(self, frames) -> None:
        assert sockets.send_frames(self.sock, frames, timeout_ms=2000)

    def recv(self, timeout_s: float = 5.0):
        frames = sockets.recv_frames(self.sock, int(timeout_s * 1000))
        assert frames is not None, "no reply from the server"
        return decode_game(frames)

    def ask(self, message, timeout_s: float = 5.0):
        self.send(message.to_frames())
        return self.recv(timeout_s)

    def close(self) -> None:
        sockets.close_context(self.ctx, linger_ms=0)


def counter(collector: Collector, key: str) -> float:
    collector.pump(0)
    return collector.counter(SERVER, key, 0)


def wait_counter(collector: Collector, key: str, at_least: float, timeout_s: float = 20.0) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        collector.pump()
        if collector.counter(SERVER, key, 0) >= at_least:
            return collector.counter(SERVER, key, 0)
    raise AssertionError(f"{key} stayed below {at_least}: {dict(collector.beats[SERVER].counters)}")


def play(agent: Agent, steps: int, tag: float = 0.0) -> None:
    for _ in range(steps):
        action = agent.act(np.array([tag, 0.0, 0.01, 0.0], np.float32), 1.0)
        assert action in (0, 1)


def test_hostile_input_is_refused_with_the_request_id_and_counted_while_a_good_game_is_served(served):
    endpoint, collector, _, _ = served
    good = Agent(endpoint, game="good", timeout_s=10.0)
    bad = RawGame(endpoint)
    try:
        before = {
            code: counter(collector, f"game_errors.{code}")
            for code in (
                "malformed",
                "no_session",
                "unknown_stream",
                "bad_obs",
                "space_mismatch",
                "busy",
                "bad_kind",
                "no_action_pending",
            )
        }
        obs = np.zeros(4, np.float32)
        err = bad.ask(GameStep(11, 1, obs))
        assert isinstance(err, GameError) and (err.code, err.request_id, err.fatal) == ("no_session", 11, True)
        wrong = GameSpaces((5,), "<f4", "discrete", 3, (), "<i8")
        err = bad.ask(GameHello(12, "bad", 1, wrong))
        assert (err.code, err.request_id) == ("space_mismatch", 12) and "obs_shape [5] != [4]" in err.message
        welcome = bad.ask(GameHello(13, "bad", 2))
        assert isinstance(welcome, GameWelcome) and welcome.spaces.obs_shape == (4,) and len(welcome.streams) == 2
        s0, s1 = welcome.streams
        cases = [
            (GameStep(20, s0, np.zeros(5, np.float32)), "bad_obs"),  # wrong shape
            (GameStep(21, s0, np.zeros(4, np.float64)), "bad_obs"),  # wrong dtype
            (GameStep(22, s0, np.array([0, np.nan, 0, 0], np.float32)), "bad_obs"),
            (GameStep(23, s0, np.zeros((512, 512), np.float32)), "bad_obs"),  # 1 MiB where 16 bytes belong
            (GameStep(24, 999_999, obs), "unknown_stream"),
            (GameStep(25, s0, obs, 1.0, True), "no_action_pending"),
            (GameAction(26, s0, 3, np.array([1])), "bad_kind"),
        ]
        for _i, (message, code) in enumerate(cases):
            err = bad.ask(message)
            assert isinstance(err, GameError) and (err.code, err.request_id) == (code, message.request_id), err
            play(good, 3)  # the good game is served between every bad message
        head = msgpack.packb(
            {
                "v": 1,
                "kind": "game_step",
                "request_id": 30,
                "stream": s0,
                "reward": "x",
                "done": False,
                "truncated": False,
                "arrays": [],
            }
        )
        bad.send([head])
        err = bad.recv()
        assert (err.code, err.request_id) == ("malformed", 30) and "reward" in err.message
        bad.send([b"\xc1 not msgpack"])
        err = bad.recv()
        assert (err.code, err.request_id) == ("malformed", 0)
        huge = RawGame(endpoint)  # a frame over the server's cap (4 MiB here): dropped with its connection
        huge.send(GameStep(31, s0, np.zeros(3 << 20, np.float32)).to_frames())
        assert sockets.recv_frames(huge.sock, 500) is None
        huge.close()
        play(good, 3)
        # a second step of a stream before reading the reply to its first: refused `busy` if the first still
        # waited for its action when the second arrived; if the server had already answered the first (it does
        # not wait for a stream that has not stepped lately), the second is an ordinary step. Never a lost reply.
        bad.send(GameStep(40, s1, obs).to_frames())
        bad.send(GameStep(41, s1, obs).to_frames())
        replies = {m.request_id: m for m in (bad.recv(), bad.recv())}
        assert isinstance(replies[40], GameAction)
        refused_busy = isinstance(replies[41], GameError)
        assert refused_busy and replies[41].code == "busy" or isinstance(replies[41], GameAction), replies[41]
        play(good, 3)
        expected = {
            "malformed": 2,
            "no_session": 1,
            "unknown_stream": 1,
            "bad_obs": 4,
            "space_mismatch": 1,
            "busy": int(refused_busy),
            "bad_kind": 1,
            "no_action_pending": 1,
        }
        for code, n in expected.items():
            wait_counter(collector, f"game_errors.{code}", before[code] + n)
    finally:
        good.close()
        bad.close()


def test_a_flood_of_requests_without_reading_replies_never_blocks_another_game(served):
    endpoint, collector, _, _ = served
    good = Agent(endpoint, game="good", timeout_s=10.0)
    flood = RawGame(endpoint)
    try:
        stream = flood.ask(GameHello(1, "flood")).streams[0]
        handled = ("game_errors.busy", "serve_requests")
        before = sum(counter(collector, key) for key in handled)
        frames = GameStep(2, stream, np.zeros(4, np.float32)).to_frames()
        sent = good_steps = 0
        for i in range(20_000):  # never reads: its queue fills and sends start to fail, which is fine
            if not sockets.send_frames(flood.sock, frames):
                break
            sent += 1
            if i % 2000 == 0:
                play(good, 2)
                good_steps += 2
        assert sent > 100
        play(good, 20)  # still served, well within its timeout
        good_steps += 20
        # Each flood step the server read was answered: `busy` while the stream's previous step still waited
        # for its batch, an action when it had already been answered (which of the two depends on timing).
        deadline = time.monotonic() + 20.0
        while sum(counter(collector, key) for key in handled) < before + good_steps + 50:
            assert time.monotonic() < deadline, dict(collector.beats[SERVER].counters)
            time.sleep(0.1)
    finally:
        good.close()
        flood.close()


def test_games_that_leave_stall_or_reconnect_end_their_episodes_and_get_fresh_streams(served):
    endpoint, collector, _, _ = served
    time.sleep(TIMEOUT_S + 0.5)  # raw games of earlier tests left without a bye: let them expire first
    deadline = time.monotonic() + 20
    while counter(collector, "games") != 0:  # no game connected: every earlier session has ended
        assert time.monotonic() < deadline, dict(collector.beats[SERVER].counters)
        collector.pump()
    time.sleep(0.5)  # a heartbeat interval or two: the counters below are the ones after those ends
    collector.pump()
    left, timed_out, cut = (counter(collector, k) for k in ("games_left", "games_timed_out", "episodes_cut"))
    seen: set[int] = set()
    for round_ in range(3):
        agents = [Agent(endpoint, game=f"g{i}", timeout_s=10.0) for i in range(4)]
        for agent in agents:
            assert agent.stream not in seen  # a reconnect is a new stream
            seen.add(agent.stream)
            play(agent, 5, tag=agent.stream)
        agents[0].close()  # says bye
        agents[1].sock.close(linger=0)  # vanishes without a word: the silence timeout ends it
        agents[1].sock = None
        agents[1].close()
        agents[2].act(np.zeros(4, np.float32), 0.0, done=True)  # ends its episode properly, then stalls
        play(agents[3], 5, tag=agents[3].stream)
        time.sleep(TIMEOUT_S + 0.5)
        # the server has ended the three silent sessions (waited for: a loaded machine may run it late)
        wait_counter(collector, "games_timed_out", timed_out + 3 * (round_ + 1))
        with pytest.raises(AgentError) as gone:
            agents[3].act(np.zeros(4, np.float32), 1.0)  # stalled past the timeout: its session is over
        assert gone.value.code in ("timeout", "no_session") and gone.value.fatal
        agents[2].close()
        agents[3].close()
    wait_counter(collector, "games_timed_out", timed_out + 3 * 3)  # the vanished and both stalled, per round
    wait_counter(collector, "games_left", left + 3)
    wait_counter(collector, "episodes_cut", cut + 3 * 3)
    fresh = Agent(endpoint, game="after", timeout_s=10.0)
    play(fresh, 5)
    fresh.close()


@needs_c_toolchain
def test_a_game_written_in_c_from_the_protocol_alone_is_served(served, tmp_path):
    endpoint, collector, _, _ = served
    binary = build_c_game(tmp_path)
    steps_before = counter(collector, "env_steps")
    run = subprocess.run([str(binary), endpoint, "1500"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    steps, episodes, version = (int(x) for x in run.stdout.split()[1::2])
    assert steps == 1500 and episodes >= 1 and version >= 0, run.stdout
    wait_counter(collector, "env_steps", steps_before + 1500)
