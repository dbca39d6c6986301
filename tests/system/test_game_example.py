"""The example as a user runs it: `tandem up examples/game_cartpole.toml`, then two game processes that learn
and stop when the run ends."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tandem.client.game import find_endpoint
from tandem.daemons.runtime.exit_codes import ExitCode
from tests.example_games import build_c_game, killed_if_left, needs_c_toolchain, python_game
from tests.system.harness import ROOT, finish, up

# A recurrent policy's server keeps a state per game stream and sends each unroll's initial one: its learner
# counts a batch without it (or of another width) as malformed, so `batches_malformed == 0` below checks that too.
RECURRENT = ("model.core='lstm'", "model.core_size=32", "algorithm.minibatch_by='unrolls'")


@pytest.mark.timeout(150)
@pytest.mark.parametrize("core", [(), RECURRENT], ids=["feed-forward", "lstm"])
def test_two_game_processes_train_the_learner_through_the_action_server(tmp_path, core):
    proc = up(
        tmp_path,
        "stop.seconds=30",
        "eval.enabled=false",
        "algorithm.batch_size=256",
        *core,
        example="game_cartpole.toml",
    )
    with killed_if_left(python_game(tmp_path / "run", 2, 300, tmp_path), 10) as games:
        server = status_while_served(tmp_path, deadline_s=60)
        # asked to play 300 s, the games stop when the run does (its server's `shutdown`, then no run)
        game_out, game_err = games.communicate(timeout=90)
    out, err = finish(proc, 60)
    assert server["games"] == 2 and server["serve_requests_per_s"] > 0 and server["serve_batch_mean"] >= 1, server
    assert 0 < server["serve_latency_p50_ms"] <= server["serve_latency_p99_ms"], server
    assert games.returncode == 0 and game_err.count("the run is over") == 2, game_err[-3000:]
    assert proc.returncode == ExitCode.OK, err[-3000:]
    played = [line for line in game_out.splitlines() if line.startswith("game ")]
    assert len(played) == 2 and all(" 0 steps" not in line for line in played), game_out
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    ]
    assert rows[-1]["updates"] > rows[0]["updates"] and rows[-1]["batches_malformed"] == 0, rows[-1]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["env_steps"] > 1000, summary


def status_while_served(tmp_path, deadline_s: float) -> dict:
    """`tandem status --json`'s line for the action server, once both games are connected and served."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        status = subprocess.run(
            [sys.executable, "-m", "tandem", "status", "--run-dir", str(tmp_path / "run"), "--json"],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=ROOT,
        )
        if status.returncode == 0:
            servers = json.loads(status.stdout)["game_servers"]
            last = servers[0] if servers else None
            if last and last["games"] == 2 and last["serve_requests_per_s"] and last["serve_batch_mean"]:
                text = subprocess.run(
                    [sys.executable, "-m", "tandem", "status", "--run-dir", str(tmp_path / "run")],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    cwd=ROOT,
                ).stdout
                assert "game server actor-0: port" in text and "requests/s" in text, text
                return last
        time.sleep(1.0)
    raise AssertionError(f"status never showed two served games: {last}")


@pytest.mark.timeout(180)
def test_a_two_player_game_plays_both_seats_through_the_server_and_the_policy_beats_random_play(tmp_path):
    """examples/tictactoe_game.py: each game process asks for both seats' moves over two streams; one policy learns
    both by playing itself, and the evaluator (the same game against a random legal player) sees it win. An
    untrained policy scores about -0.9 there (its moves onto taken squares lose), random legal play about 0."""
    proc = up(tmp_path, "stop.eval_return=0.3", "stop.seconds=120", example="game_tictactoe.toml")
    games = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "tictactoe_game.py"), "--run-dir", str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        out, err = finish(proc, 150)
        game_out, game_err = games.communicate(timeout=60)  # they stop when the run does
    finally:
        if games.poll() is None:
            games.kill()
            games.wait(timeout=10)
    summary = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == ExitCode.OK and "evaluation return" in summary["reason"], (summary, err[-3000:])
    assert games.returncode == 0 and game_err.count("the run is over") == 2, game_err[-3000:]
    played = [line for line in game_out.splitlines() if line.startswith("game ")]
    assert len(played) == 2 and all(" 0 boards" not in line for line in played), game_out
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    ]
    assert rows[-1]["batches_malformed"] == 0, rows[-1]


@pytest.mark.timeout(180)
def test_game_processes_sending_a_varying_set_of_units_train_the_entity_policy(tmp_path):
    """examples/game_skirmish.toml and examples/entity_skirmish_game.py as the guide runs them: each game sends
    its units and enemies as entities (PROTOCOL.md 7.6) and gets one action per unit; the run stops on the
    evaluator's return (random play returns about 11 of 24)."""
    proc = up(tmp_path, "stop.seconds=120", "stop.eval_return=19.0", example="game_skirmish.toml")
    with killed_if_left(python_game(tmp_path / "run", 2, 300, tmp_path, script="entity_skirmish_game.py"), 10) as games:
        game_out, game_err = games.communicate(timeout=150)
    out, err = finish(proc, 60)
    assert games.returncode == 0 and game_err.count("the run is over") == 2, game_err[-3000:]
    assert proc.returncode == ExitCode.OK, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["eval_return"] >= 19.0, summary
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    ]
    assert rows[-1]["batches_malformed"] == 0 and rows[-1]["updates"] > 0, rows[-1]


@needs_c_toolchain
@pytest.mark.timeout(180)
def test_games_written_in_c_sending_a_varying_set_of_units_train_the_entity_policy(tmp_path):
    """examples/c_game/skirmish_game.c, written from PROTOCOL.md 7.6 alone: two of them send their units and enemies
    as entities and get one target and one stance per unit (checked in the game: in range, never a wreck); they play
    until the run stops on the evaluator's return and the server says so (random play returns about 11 of 24)."""
    binary = build_c_game(tmp_path, "skirmish_game")
    proc = up(tmp_path, "stop.seconds=120", "stop.eval_return=19.0", example="game_skirmish.toml")
    endpoint = find_endpoint(tmp_path / "run", timeout_s=60)
    games = [
        subprocess.Popen([str(binary), endpoint, "10000000", str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for seed in (1, 2)
    ]
    try:
        played = [game.communicate(timeout=150) for game in games]
    finally:
        for game in games:
            if game.poll() is None:
                game.kill()
                game.communicate(timeout=10)
    out, err = finish(proc, 60)
    for game, (game_out, game_err) in zip(games, played):
        assert game.returncode == 0 and b"the action server stopped" in game_err, game_err[-2000:]
        steps = int(game_out.split()[1])
        assert steps > 100, game_out
    summary = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == ExitCode.OK and summary["eval_return"] >= 19.0, (summary, err[-3000:])
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "learner-default" / "metrics.jsonl").read_text().splitlines()
    ]
    assert rows[-1]["batches_malformed"] == 0 and rows[-1]["updates"] > 0, rows[-1]
