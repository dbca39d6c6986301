"""The game client library: no torch, a bounded wait on every call, its own errors when the server is gone."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from tandem.client.game import Agent, AgentError, ServerGone, find_endpoint, find_endpoint_again
from tandem.protocol import sockets
from tandem.protocol.game import GameAction, GameError, GameHello, GameSpaces, GameStep, GameWelcome, decode_game

SPACES = GameSpaces((4,), "<f4", "discrete", 2, (), "<i8")


def test_importing_the_client_library_loads_no_torch():
    code = "import sys, tandem.client.game; assert 'torch' not in sys.modules, 'torch was imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


class FakeServer:
    """A ROUTER that answers as the test says (real sockets, scripted replies)."""

    def __init__(self, ctx):
        self.sock = sockets.game_router(ctx, "tcp://127.0.0.1:*", 1 << 20)
        self.endpoint = sockets.bound_endpoint(self.sock)

    def next(self, timeout_ms: int = 5000):
        frames = sockets.recv_frames(self.sock, timeout_ms)
        assert frames is not None
        return bytes(frames[0]), decode_game(frames[1:])

    def reply(self, identity: bytes, message) -> None:
        assert sockets.send_to(self.sock, identity, message.to_frames())


def connect(server: FakeServer, timeout_s: float = 2.0) -> Agent:
    """An Agent whose hello the fake server answers from this thread (the Agent waits in another call)."""
    import threading

    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("agent", Agent(server.endpoint, "t", timeout_s)))
    thread.start()
    identity, hello = server.next()
    assert isinstance(hello, GameHello) and hello.streams == 1
    server.reply(identity, GameWelcome(hello.request_id, [7], SPACES, 10.0, "fake"))
    thread.join(timeout=5)
    server.identity = identity
    return result["agent"]


def test_no_server_is_a_server_gone_error_within_the_timeout():
    start = time.monotonic()
    with pytest.raises(ServerGone, match="within 0.5 s"):
        Agent("tcp://127.0.0.1:1", timeout_s=0.5)
    assert time.monotonic() - start < 5.0


def test_a_server_that_stops_answering_is_a_server_gone_error_and_the_agent_closes(zmq_ctx):
    server = FakeServer(zmq_ctx)
    agent = connect(server, timeout_s=0.5)
    with pytest.raises(ServerGone, match="no reply"):
        agent.act([0, 0, 0, 0])
    assert agent.closed
    with pytest.raises(ServerGone, match="closed"):
        agent.act([0, 0, 0, 0])


def test_actions_errors_and_late_replies(zmq_ctx):
    import threading

    server = FakeServer(zmq_ctx)
    agent = connect(server)
    results = []

    def act(*args):
        try:
            results.append(agent.act(*args))
        except AgentError as exc:
            results.append(exc)

    def serve(make_reply):
        thread = threading.Thread(target=act, args=([1, 2, 3, 4], 0.5))
        thread.start()
        identity, step = server.next()
        assert isinstance(step, GameStep) and step.stream == 7 and step.obs.dtype == np.float32
        server.reply(identity, GameAction(step.request_id - 1, 7, 1, np.array([0])))  # a late one: skipped
        server.reply(identity, make_reply(step))
        thread.join(timeout=5)
        return results.pop()

    assert serve(lambda s: GameAction(s.request_id, 7, 4, np.array([1]))) == 1 and agent.version == 4
    err = serve(lambda s: GameError(s.request_id, "bad_obs", "nope", False))
    assert isinstance(err, AgentError) and err.code == "bad_obs" and not agent.closed
    assert serve(lambda s: GameAction(s.request_id, 7, 4)) is None  # an episode's end
    agent.close()


def test_find_endpoint_waits_for_the_file_then_gives_up(tmp_path):
    with pytest.raises(ServerGone, match="actor-0.endpoint"):
        find_endpoint(tmp_path, timeout_s=0.2)
    (tmp_path / "games").mkdir()
    (tmp_path / "games" / "actor-0.endpoint").write_text("tcp://127.0.0.1:5\n")
    assert find_endpoint(tmp_path, timeout_s=0.2) == "tcp://127.0.0.1:5"


def test_a_shutdown_notice_that_came_while_the_game_was_busy_ends_its_next_step_at_once(zmq_ctx):
    server = FakeServer(zmq_ctx)
    agent = connect(server, timeout_s=10.0)
    server.reply(server.identity, GameError(0, "shutdown", "stopping", True))
    sockets.close(server.sock, linger_ms=500)  # the server goes, its notice delivered
    time.sleep(0.3)  # the game was busy with its frame: the connection closed before it read anything
    start = time.monotonic()
    with pytest.raises(AgentError) as gone:
        agent.act([0, 0, 0, 0])
    assert (gone.value.code, gone.value.fatal) == ("shutdown", True) and agent.closed
    assert time.monotonic() - start < 5.0  # not its 10 s timeout


def test_find_endpoint_again_waits_for_a_successor_or_the_end_of_the_run(tmp_path):
    import threading

    (tmp_path / "games").mkdir()
    (tmp_path / "endpoint").write_text("tcp://127.0.0.1:9\n")  # the supervisor's: the run goes on
    with pytest.raises(ServerGone, match="has not ended"):
        find_endpoint_again(tmp_path, timeout_s=0.2)
    later = threading.Timer(0.3, lambda: (tmp_path / "games" / "actor-0.endpoint").write_text("tcp://127.0.0.1:6\n"))
    later.start()
    assert find_endpoint_again(tmp_path, timeout_s=5.0) == "tcp://127.0.0.1:6"
    later.join()
    (tmp_path / "games" / "actor-0.endpoint").unlink()
    (tmp_path / "endpoint").unlink()
    assert find_endpoint_again(tmp_path, timeout_s=5.0) is None


def test_a_board_game_opens_its_seats_as_streams_of_one_session_so_it_counts_as_one_game(make_server):
    # Tic-Tac-Toe's game processes each opened an Agent per seat, and status said "8 games" for 4 of them.
    from tests.daemons.game_harness import OBS, WAIT_S, serve_in_thread

    server = make_server(bind=False)
    serve_in_thread(server)
    endpoint = find_endpoint(server.config.run.dir, timeout_s=WAIT_S)
    with Agent(endpoint, game="board", timeout_s=WAIT_S, streams=2) as agent:
        assert len(agent.streams) == 2 and agent.streams[0] != agent.streams[1]
        assert [agent.act(OBS, stream=seat) for seat in (0, 1, 0)] == [0, 0, 0]  # the stand-in learner's action
        assert agent.act(OBS, 1.0, done=True, stream=1) is None  # a seat's episode ends on its own stream
        assert len(server.games.sessions) == 1 and server.games.open_streams == 2  # status: 1 game, 2 streams
        with pytest.raises(ValueError, match="streams 0..1"):
            agent.act(OBS, stream=2)
    server.stop.requested = True
    server.thread.join(WAIT_S)
