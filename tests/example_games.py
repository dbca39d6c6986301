"""The example games as their users start them: examples/cartpole_game.py, and examples/c_game built with make."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tandem.client.harness import kill_session

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def python_game(
    run_dir: Path, games: int, seconds: int, cwd: Path, *flags: str, script: str = "cartpole_game.py"
) -> subprocess.Popen:
    """`examples/SCRIPT --run-dir RUN_DIR --games N --seconds S FLAGS...` (cartpole_game.py unless `script` says),
    its output in text pipes."""
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script), "--run-dir", str(run_dir)]
        + ["--games", str(games), "--seconds", str(seconds), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,  # its game processes with it: a failed check ends them all (killed_if_left)
    )


@contextmanager
def killed_if_left(game: subprocess.Popen, timeout_s: float) -> Iterator[subprocess.Popen]:
    """`game` for the with block; still running after it (a failed check), it is killed with what it started (a
    game started in a session of its own) and its pipes drained."""
    try:
        yield game
    finally:
        kill_session(game)  # the games a --games N parent runs as processes outlive it otherwise
        if game.poll() is None:
            game.kill()
            game.communicate(timeout=timeout_s)


def c_toolchain_missing() -> str | None:
    """Why the C example cannot be built here, or None."""
    if not shutil.which("gcc") or not shutil.which("make"):
        return "gcc or make is not installed"
    for header in ("/usr/include/zmq.h", "/usr/include/msgpack.h"):
        if not os.path.exists(header):
            return f"{header} is missing (apt-get install -y libzmq3-dev libmsgpack-dev; Debian 13: libmsgpack-c-dev)"
    return None


needs_c_toolchain = pytest.mark.skipif(c_toolchain_missing() is not None, reason=str(c_toolchain_missing()))


def build_c_game(tmp_path: Path, game: str = "cartpole_game") -> Path:
    """examples/c_game copied into `tmp_path` and built there with make, as its Makefile says: the game binary."""
    for name in ("Makefile", "game_wire.h", "cartpole_game.c", "skirmish_game.c"):
        shutil.copy(EXAMPLES / "c_game" / name, tmp_path / name)
    build = subprocess.run(["make", "-C", str(tmp_path), game], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stdout + build.stderr
    return tmp_path / game
