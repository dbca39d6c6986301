"""The action server against PROTOCOL.md section 7, over real sockets: one reply per step, ids, notices, restarts.

The server runs in this process with a stand-in for its learner link and, where silence matters, a clock the
test moves: each test pumps `serve_once` itself, so what it asserts is what the spec guarantees, not a race.
"""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest

from tandem.client.game import Agent, AgentError, find_endpoint, find_endpoint_again
from tandem.daemons.actor.serve.server import endpoint_file
from tandem.protocol import framing
from tandem.protocol.game import GameAction, GameBye, GameError, GameHello, GameStep, GameWelcome
from tests.daemons.game_harness import (
    OBS,
    TIMEOUT_S,
    WAIT_S,
    Clock,
    Game,
    hello,
    pump,
    replies_to,
    serve_in_thread,
    settle,
)


@pytest.mark.parametrize("ending", ["hello", "bye"])
def test_a_step_waiting_when_its_session_ends_gets_exactly_one_reply(make_server, zmq_ctx, ending):
    server = make_server(Clock())  # the clock stands still: a batch waiting for another stream never goes
    game = Game(zmq_ctx, server.endpoint)
    s0, _ = hello(server, game, 1, streams=2)
    game.send(GameStep(2, s0, OBS))  # waits for the other stream, which never steps
    settle(server, [game], 0.1)
    assert len(server.games.pending) == 1
    game.send(GameHello(3, "g", 1) if ending == "hello" else GameBye(3, "leaving"))
    if ending == "hello":
        got = pump(server, [game], lambda got: replies_to(got[0], 2) and replies_to(got[0], 3))[0]
        assert isinstance(replies_to(got, 3)[0], GameWelcome)
    else:
        got = pump(server, [game], lambda got: replies_to(got[0], 2))[0]
    server.clock.t += 60.0  # anything still owed would go now
    got += settle(server, [game])[0]
    [reply] = replies_to(got, 2)
    assert isinstance(reply, GameError) and reply.code == "cancelled" and not reply.fatal, reply
    assert server.games.counts["steps_cancelled"] == 1 and "cancelled" not in server.stats.errors  # not a refusal


def test_a_refusal_carries_the_request_id_whenever_the_header_is_readable(make_server, zmq_ctx):
    server = make_server(Clock())
    game = Game(zmq_ctx, server.endpoint)
    step = msgpack.unpackb(GameStep(0, 1, OBS).to_frames()[0])
    cases = [  # (header changes, the code, the id the error carries)
        ({"v": 2, "request_id": 41}, "malformed", 41),
        ({"kind": "game_nonsense", "request_id": 42}, "bad_kind", 42),
        ({"kind": "heartbeat", "request_id": 43}, "bad_kind", 43),  # another socket's kind
        ({"kind": "game_action", "request_id": 44}, "bad_kind", 44),  # a reply kind, fields unchecked
        ({"kind": 5, "request_id": 45}, "malformed", 45),
        ({"request_id": -5}, "malformed", 0),  # no usable id: 0
        ({"request_id": True}, "malformed", 0),
        ({"request_id": 46, "stream": -1}, "malformed", 46),
    ]
    for changes, code, request_id in cases:
        game.send([msgpack.packb({**step, **changes}), OBS.tobytes()])
        [err] = pump(server, [game], lambda got: got[0])[0]
        assert isinstance(err, GameError) and (err.code, err.request_id, err.fatal) == (code, request_id, False), (
            changes,
            err,
        )
    for streams in (0, 257):  # out of range: malformed, with the hello's id
        game.send(framing.encode("game_hello", {"request_id": 50 + streams, "game": "g", "streams": streams}))
        [err] = pump(server, [game], lambda got: got[0])[0]
        assert (err.code, err.request_id) == ("malformed", 50 + streams) and "streams" in err.message
    # `spaces` may be left out: the same as nil
    game.send(framing.encode("game_hello", {"request_id": 60, "game": "g", "streams": 1}))
    [welcome] = pump(server, [game], lambda got: got[0])[0]
    assert isinstance(welcome, GameWelcome) and welcome.request_id == 60
    game.send([b"\xc1 not msgpack"])
    [err] = pump(server, [game], lambda got: got[0])[0]
    assert (err.code, err.request_id) == ("malformed", 0)


def test_a_game_sending_only_malformed_messages_is_not_silent(make_server, zmq_ctx):
    clock = Clock()
    server = make_server(clock)
    game = Game(zmq_ctx, server.endpoint)
    [stream] = hello(server, game, 1)
    for _i in range(4):  # 4 x 0.4 timeouts: far past the timeout since the hello, never silent that long
        clock.t += 0.4 * TIMEOUT_S
        game.send([b"\xc1 garbage"])
        [err] = pump(server, [game], lambda got: got[0])[0]
        assert err.code == "malformed", err
    game.send(GameStep(9, stream, OBS))
    got = pump(server, [game], lambda got: got[0])[0]
    assert isinstance(got[0], GameAction) and got[0].request_id == 9, got
    assert server.games.counts["games_timed_out"] == 0


def test_a_timeout_notice_carries_request_id_0(make_server, zmq_ctx):
    clock = Clock()
    server = make_server(clock)
    game = Game(zmq_ctx, server.endpoint)
    hello(server, game, 1)
    clock.t += TIMEOUT_S + 1
    [notice] = pump(server, [game], lambda got: got[0])[0]
    assert (notice.code, notice.request_id, notice.fatal) == ("timeout", 0, True)
    assert server.games.counts["games_timed_out"] == 1


def test_an_episode_end_is_acknowledged_with_the_servers_current_version(make_server, zmq_ctx):
    server = make_server(Clock())
    game = Game(zmq_ctx, server.endpoint)
    [stream] = hello(server, game, 1)
    game.send(GameStep(2, stream, OBS))
    [action] = pump(server, [game], lambda got: got[0])[0]
    assert action.action is not None and action.version == 7
    game.send(GameStep(3, stream, OBS, 1.0, done=True))
    [ack] = pump(server, [game], lambda got: got[0])[0]
    assert isinstance(ack, GameAction) and ack.action is None and (ack.request_id, ack.version) == (3, 7)


def test_after_an_oversize_frame_the_connection_is_a_new_one_without_a_session(make_server, zmq_ctx):
    server = make_server(Clock())
    game = Game(zmq_ctx, server.endpoint)
    [stream] = hello(server, game, 1)
    game.send(GameStep(2, stream, np.zeros(3 << 20, np.float32)))  # 12 MiB over the 4 MiB cap: cut off unread
    # The DEALER reconnects by itself; a step sent while the old connection was being cut may be lost with
    # it, so the game tries again (new ids) until one is answered: `no_session`, as for any new connection.
    deadline = time.monotonic() + WAIT_S
    for request_id in range(3, 1000):
        assert time.monotonic() < deadline, "no reply after the oversize frame"
        game.send(GameStep(request_id, stream, OBS))
        got = settle(server, [game], 0.2)[0]
        if got:
            break
    assert all((m.code, m.fatal) == ("no_session", True) and 3 <= m.request_id <= request_id for m in got), got


def test_shutdown_answers_every_waiting_step_and_tells_every_session(make_server, zmq_ctx):
    server = make_server(Clock())
    waiting, idle = Game(zmq_ctx, server.endpoint), Game(zmq_ctx, server.endpoint)
    s0, _ = hello(server, waiting, 1, streams=2)
    hello(server, idle, 1)
    waiting.send(GameStep(2, s0, OBS))
    settle(server, [waiting, idle], 0.1)
    assert len(server.games.pending) == 1
    server.close_games()
    assert not endpoint_file(server.config, server.runtime.name).exists()
    time.sleep(0.3)  # the games read later, after the connection closed: the notices are still there
    got: list[list] = [[], []]
    deadline = time.monotonic() + WAIT_S
    while (len(got[0]), len(got[1])) != (2, 1):
        assert time.monotonic() < deadline, got
        for messages, game in zip(got, (waiting, idle)):
            messages.extend(game.received())
    assert sorted((m.code, m.request_id, m.fatal) for m in got[0]) == [("shutdown", 0, True), ("shutdown", 2, True)]
    assert [(m.code, m.request_id, m.fatal) for m in got[1]] == [("shutdown", 0, True)]


def test_a_restarted_server_is_found_again_promptly_and_never_reuses_a_stream_id(make_server, tmp_path):
    run = tmp_path / "run"
    (run / "endpoint").parent.mkdir(parents=True, exist_ok=True)
    (run / "endpoint").write_text("tcp://127.0.0.1:1\n")  # the supervisor's: the run goes on

    first = make_server(bind=False)
    thread = serve_in_thread(first)
    agent = Agent(find_endpoint(run, timeout_s=WAIT_S), game="g", timeout_s=10.0)
    assert agent.act(OBS) == 0
    first.stop.requested = True
    thread.join(WAIT_S)
    assert not thread.is_alive()
    time.sleep(0.3)  # the game is busy with its frame while the server goes
    start = time.monotonic()
    with pytest.raises(AgentError) as gone:
        agent.act(OBS)  # the notice is waiting at the game: known at once, not after its 10 s timeout
    assert (gone.value.code, gone.value.fatal) == ("shutdown", True) and agent.closed
    assert time.monotonic() - start < WAIT_S
    second = make_server(bind=False)
    thread = serve_in_thread(second)
    try:
        again = Agent(find_endpoint_again(run, timeout_s=WAIT_S), game="g", timeout_s=10.0)
        assert again.stream > agent.stream  # a later life's ids start past every id an earlier one reserved
        assert again.act(OBS) == 0
        again.close()
    finally:
        second.stop.requested = True
        thread.join(WAIT_S)
    (run / "endpoint").unlink()  # the run ended: nothing more to find
    assert find_endpoint_again(run, timeout_s=WAIT_S) is None
