"""The example games stop cleanly when the run ends (the server's `shutdown` notice) and follow a restart."""

from __future__ import annotations

import subprocess
import time

from tests.daemons.game_harness import (
    WAIT_S,
    serve_in_thread,
)
from tests.example_games import build_c_game, killed_if_left, needs_c_toolchain, python_game
from tests.system.harness import ROOT

START_S = 60.0  # a game process's start (Python, gymnasium) on a busy machine


def wait_steps(server, at_least: int, timeout_s: float, game: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while server.games.env_steps < at_least:
        assert game.poll() is None, game.communicate()
        assert time.monotonic() < deadline, f"{server.games.env_steps} steps served in {timeout_s} s"
        time.sleep(0.05)


def stop(server) -> None:
    server.stop.requested = True
    server.thread.join(WAIT_S)
    assert not server.thread.is_alive()


def test_the_python_example_game_follows_a_restart_and_stops_when_the_run_ends(make_server, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "endpoint").write_text("tcp://127.0.0.1:1\n")  # the supervisor's: the run goes on while it is there
    first = make_server(bind=False)
    serve_in_thread(first)
    with killed_if_left(python_game(run, 1, 120, ROOT, "--timeout-s", "10"), WAIT_S) as game:
        wait_steps(first, 50, START_S, game)
        stop(first)  # a restart: the supervisor starts the server again
        second = make_server(bind=False)
        serve_in_thread(second)
        wait_steps(second, 50, WAIT_S * 2, game)
        stop(second)  # the end of the run: the servers stop, then `tandem up` removes its endpoint file
        (run / "endpoint").unlink()
        out, err = game.communicate(timeout=WAIT_S * 2)  # not the 120 s it was asked to play
    assert game.returncode == 0, err[-3000:]
    assert "run is over" in err and out.startswith("game 0: ") and " 0 steps" not in out, (out, err[-3000:])


@needs_c_toolchain
def test_the_c_example_game_exits_0_when_its_server_stops(make_server, tmp_path):
    binary = build_c_game(tmp_path)
    server = make_server(bind=False)
    serve_in_thread(server)
    deadline = time.monotonic() + WAIT_S
    while server.endpoint == "":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    c_game = subprocess.Popen(
        [str(binary), server.endpoint, "1000000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with killed_if_left(c_game, WAIT_S) as game:
        wait_steps(server, 100, WAIT_S * 2, game)
        stop(server)
        out, err = game.communicate(timeout=WAIT_S)  # well inside the game's own 10 s wait for a reply
    assert game.returncode == 0, err
    assert "server stopped" in err and out.startswith("steps "), (out, err)
