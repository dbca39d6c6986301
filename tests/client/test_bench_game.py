"""The game benches: their parts against an action server in this process, and a smoke run of `bench game
--processes` (a real `tandem up`; its record checked for completeness, no speed asserted)."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tandem.client.bench.game_solve import game_errors, player
from tandem.client.cli import cli
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


@pytest.mark.timeout(300)
def test_bench_game_processes_serves_the_example_to_a_process_per_game_and_says_what_each_part_cost():
    # Served games were measured only by the bench's own lock-step drivers against a pinned DQN run, while a
    # game that follows the spec (a process of its own, the client library, the example's APPO config with its
    # evaluator) made a third of their frames/s: this mode measures that set-up.
    result = CliRunner().invoke(cli, ["bench", "game", "--processes", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output.strip().splitlines()[-1])
    assert (data["benchmark"], data["mode"], data["transport"], data["quick"]) == ("game", "processes", "tcp", True)
    assert Path(data["config"]).name == "game_cartpole.toml" and data["repeats"] == 1 and data["overrides"] == []
    assert data["alone_frames_per_s"] > 0
    for side in ("training", "echo"):
        assert [p["games"] for p in data[side]] == [1, 8]
        for p in data[side]:
            assert p["frames_per_s"] > 0 and 0 < p["latency_p50_ms"] <= p["latency_p99_ms"]
            assert set(p["cores"]) == {"games", "server", "learner", "evaluator", "supervisor"}
            assert p["cores"]["games"] > 0 and p["dropped_by_learner"] >= 0 and p["dropped_by_actors"] >= 0
    for p in data["training"]:  # served: the server batched across the games; the echo has no server
        assert 1 <= p["batch_mean"] <= p["games"]
        assert p["share_of_echo"] > 0
    assert all(p["batch_mean"] is None for p in data["echo"])
    assert sum(p["learner_updates_per_s"] for p in data["training"]) > 0  # it trained on what the games sent
    assert data["target"] == {"training_frames_per_s_min": {"1": 2000.0, "8": 6000.0}}
    assert set(data["met"]) == {"1_games_frames_per_s", "8_games_frames_per_s"}


def test_bench_game_config_goes_with_processes(tmp_path):
    config = tmp_path / "game.toml"
    config.write_text("")
    result = CliRunner().invoke(cli, ["bench", "game", "--config", str(config), "--quick"])
    assert result.exit_code != 0 and "--config goes with --processes" in result.output
