"""The game benches' own parts against an action server in this process: no `tandem up`, nothing measured."""

from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace

from tandem.client.bench.game_solve import game_errors, player
from tandem.client.game import find_endpoint
from tests.daemons.game_harness import WAIT_S, serve_in_thread


def test_a_game_solve_player_plays_until_its_server_stops_and_says_what_it_played(make_server):
    # `tandem bench game-solve` once started its game processes with arguments its driver no longer took: each
    # died at once, and the served runs learned from nothing (0 env steps) without saying why.
    server = make_server(bind=False)
    serve_in_thread(server)
    endpoint = find_endpoint(server.config.run.dir, timeout_s=WAIT_S)
    out: queue.Queue = queue.Queue()  # what the player puts on its multiprocessing queue in a game process
    game = threading.Thread(target=player, args=(endpoint, 60.0, out), daemon=True)
    game.start()
    deadline = time.monotonic() + WAIT_S
    while server.games.env_steps < 50:  # it plays (its episodes end and start again: action 0 only)
        assert game.is_alive() and time.monotonic() < deadline, out.queue
        time.sleep(0.01)
    server.stop.requested = True  # the run's end: the server tells its games `shutdown`
    server.thread.join(WAIT_S)
    game.join(WAIT_S)
    assert not game.is_alive()
    report = out.get(timeout=WAIT_S)
    assert "error" not in report and report["server_stopped"] and report["frames"] >= 50
    out.put(report)
    assert game_errors([SimpleNamespace(exitcode=0)], out) == []  # a game that played to the end did not fail


def test_game_solve_names_each_game_that_failed():
    out: queue.Queue = queue.Queue()
    out.put({"frames": 120, "latencies_ms": [0.5], "server_stopped": True})  # played until the run's end
    out.put({"error": "RuntimeError: no reply within 30 s"})  # failed, and said why
    players = [SimpleNamespace(exitcode=code) for code in (0, 0, 1, None)]  # one died at once; one still plays
    assert game_errors(players, out) == [
        "RuntimeError: no reply within 30 s",
        "a game process exited with code 1 (its traceback is on stderr)",
    ]
