"""The example games stop cleanly when the run ends (the server's `shutdown` notice) and follow a restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.daemons.game_harness import (
    WAIT_S,
    serve_in_thread,
)
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
    game = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "examples" / "cartpole_game.py"),
            "--run-dir",
            str(run),
            "--games",
            "1",
            "--seconds",
            "120",
            "--timeout-s",
            "10",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        wait_steps(first, 50, START_S, game)
        stop(first)  # a restart: the supervisor starts the server again
        second = make_server(bind=False)
        serve_in_thread(second)
        wait_steps(second, 50, WAIT_S * 2, game)
        stop(second)  # the end of the run: the servers stop, then `tandem up` removes its endpoint file
        (run / "endpoint").unlink()
        out, err = game.communicate(timeout=WAIT_S * 2)  # not the 120 s it was asked to play
    finally:
        if game.poll() is None:
            game.kill()
            game.communicate(timeout=WAIT_S)
    assert game.returncode == 0, err[-3000:]
    assert "run is over" in err and out.startswith("game 0: ") and " 0 steps" not in out, (out, err[-3000:])


def c_toolchain_missing() -> str | None:
    if not shutil.which("gcc") or not shutil.which("make"):
        return "gcc or make is not installed"
    for header in ("/usr/include/zmq.h", "/usr/include/msgpack.h"):
        if not os.path.exists(header):
            return f"{header} is missing (apt-get install -y libzmq3-dev libmsgpack-dev; Debian 13: libmsgpack-c-dev)"
    return None


@pytest.mark.skipif(c_toolchain_missing() is not None, reason=str(c_toolchain_missing()))
def test_the_c_example_game_exits_0_when_its_server_stops(make_server, tmp_path):
    for name in ("Makefile", "cartpole_game.c"):
        shutil.copy(ROOT / "examples" / "c_game" / name, tmp_path / name)
    build = subprocess.run(["make", "-C", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stdout + build.stderr
    server = make_server(bind=False)
    serve_in_thread(server)
    deadline = time.monotonic() + WAIT_S
    while server.endpoint == "":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    game = subprocess.Popen(
        [str(tmp_path / "cartpole_game"), server.endpoint, "1000000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_steps(server, 100, WAIT_S * 2, game)
        stop(server)
        out, err = game.communicate(timeout=WAIT_S)  # well inside the game's own 10 s wait for a reply
    finally:
        if game.poll() is None:
            game.kill()
            game.communicate(timeout=WAIT_S)
    assert game.returncode == 0, err
    assert "server stopped" in err and out.startswith("steps "), (out, err)
