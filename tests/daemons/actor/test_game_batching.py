"""How an action server batches games' steps into inferences (PROTOCOL.md 7; issue 26 item 11), over real sockets.

The server runs in this process with a stand-in learner link that records each inference's size. Where a
test's clock stands still, a batch that waits for its deadline never goes: what is answered was answered
because nothing else was worth waiting for.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tandem.client.game import Agent, find_endpoint
from tandem.daemons.actor.serve.server import endpoint_file
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.protocol.game import GameAction, GameStep
from tests.daemons.game_harness import (
    OBS,
    WAIT_S,
    Clock,
    Game,
    hello,
    pump,
    serve_in_thread,
    settle,
)


def test_steps_of_8_games_sent_at_once_are_answered_by_one_inference(make_server, zmq_ctx):
    server = make_server(Clock())
    games = [Game(zmq_ctx, server.endpoint) for _ in range(8)]
    streams = [hello(server, game, 1)[0] for game in games]
    for game, stream in zip(games, streams):
        game.send(GameStep(2, stream, OBS))
    got = pump(server, games, lambda got: all(got))
    assert all(isinstance(m, GameAction) and m.request_id == 2 and m.action is not None for [m] in got)
    assert server.links[DEFAULT_POLICY].batches == [8] and server.stats.inferences == 1


def test_games_in_lock_step_get_one_inference_a_round_through_their_episode_ends(make_server, zmq_ctx):
    # Each game steps, then waits for its reply before its next step (as a game stepping several envs on one
    # clock does). A game whose episode ended gets its acknowledgement at once and starts the next episode
    # only in the next round: the others' batch must not wait for it, and the clock here never reaches a deadline.
    server = make_server(Clock())
    games = [Game(zmq_ctx, server.endpoint) for _ in range(8)]
    streams = [hello(server, game, 1)[0] for game in games]
    ended = [False] * 8
    rounds = 9
    for r in range(rounds):
        ends = [r > 0 and not ended[i] and (r + i) % 4 == 0 for i in range(8)]  # two games end an episode a round
        # the games back from an episode's end step first (so the batch cannot go before they arrive)
        back = [i for i in range(8) if ended[i]]
        for i in back:
            games[i].send(GameStep(10 + r, streams[i], OBS))
        waiting = len(back)
        pump(server, [], lambda _, n=waiting: len(server.games.pending) == n)
        for i in (i for i in range(8) if not ended[i]):
            games[i].send(GameStep(10 + r, streams[i], OBS, 1.0, ends[i]))
        got = pump(server, games, lambda got: all(got))
        for i, [reply] in enumerate(got):
            assert isinstance(reply, GameAction) and reply.request_id == 10 + r
            assert (reply.action is None) == ends[i], (r, i, reply)
        ended = ends
    assert server.links[DEFAULT_POLICY].batches == [8] + [6] * (rounds - 1)  # one inference a round, no more
    assert server.games.episodes == 2 * (rounds - 1)


def test_a_batch_short_of_a_stream_goes_once_steps_stop_coming_well_before_its_deadline(make_server, zmq_ctx):
    # Games driven together wait on each other's actions: a stream that will not step until its driver has the
    # others' actions would hold the batch to its deadline (2 ms) on every such round.
    server = make_server(Clock())
    stepping, other = Game(zmq_ctx, server.endpoint), Game(zmq_ctx, server.endpoint)
    stream = hello(server, stepping, 1)[0]
    hello(server, other, 1)  # awaited: it said hello lately
    stepping.send(GameStep(2, stream, OBS))
    assert settle(server, [stepping], 0.1) == [[]]  # no time has passed on the server's clock: it waits
    server.clock.t += 0.2 * server.wait_s
    assert settle(server, [stepping], 0.1) == [[]]  # steps came until a moment ago
    server.clock.t += 0.1 * server.wait_s  # a quarter of the wait without a step: nothing more is coming
    [reply] = pump(server, [stepping], lambda got: got[0])[0]
    assert isinstance(reply, GameAction) and reply.request_id == 2 and server.stats.inferences == 1


def test_a_batch_waiting_for_its_deadline_does_not_make_the_server_spin(make_server, zmq_ctx):
    server = make_server(batch_wait_ms=20.0)  # the real clock
    waiting, quiet = Game(zmq_ctx, server.endpoint), Game(zmq_ctx, server.endpoint)
    stream = hello(server, waiting, 1)[0]
    hello(server, quiet, 1)  # stepped lately (its hello): the batch waits up to 20 ms for its step, which never comes
    waiting.send(GameStep(2, stream, OBS))
    deadline = time.monotonic() + WAIT_S
    while not server.games.pending:
        assert time.monotonic() < deadline
        server.serve_once(server.clock())
    calls = 0
    while server.stats.inferences == 0:
        assert time.monotonic() < deadline
        server.serve_once(server.clock())
        calls += 1
    # The last serve_once waited out the deadline in one bounded wait (rounded up, never down to a busy 0 ms);
    # ZeroMQ's millisecond clock may end a wait up to 1 ms early, costing one more short wait at most.
    assert calls <= 3, f"{calls} calls to serve_once while one batch waited 20 ms"
    assert [m.request_id for m in settle(server, [waiting], 0.05)[0]] == [2]


def test_ipc_alone_serves_from_a_socket_in_the_run_directory_and_leaves_no_file(make_server, short_tmp):
    server = make_server(bind=False, run_dir=short_tmp, bind_address="ipc://")
    serve_in_thread(server)  # binds, writes the endpoint file, serves until stopped, then closes
    socket_file = Path(short_tmp) / "games" / "actor-0.sock"
    endpoint = find_endpoint(short_tmp, timeout_s=WAIT_S)
    assert endpoint == f"ipc://{socket_file}" == endpoint_file(server.config, "actor-0").read_text().strip()
    assert socket_file.is_socket()
    agent = Agent(endpoint, "ipc-game", timeout_s=WAIT_S)
    try:
        assert agent.act(OBS) == 0 and agent.act(OBS, 1.0) == 0 and agent.version == 7
    finally:
        agent.close()
    server.stop.requested = True
    server.thread.join(WAIT_S)
    assert not server.thread.is_alive() and sorted(os.listdir(Path(short_tmp) / "games")) == ["actor-0.streams"]
