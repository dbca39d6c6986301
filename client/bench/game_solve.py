"""`tandem bench game-solve`: time to a solved CartPole learned through the action server vs the built-in actor."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from queue import Empty

import click

from tandem.client.bench.e2e import median_solve_s, run_seed, solve_record, up_args
from tandem.client.bench.game_drive import drive
from tandem.client.bench.options import example_config_option, json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.config_cmd import bench_set_option


def player(endpoint: str, seconds: float, out: multiprocessing.Queue) -> None:
    """One game process of a served run: one CartPole game, played until `seconds` pass (longer than the run)
    or its server stops; its report (frames played, or what went wrong) goes on `out`."""
    drive(endpoint, 1, seconds, out)


def game_errors(players: list, out: multiprocessing.Queue) -> list[str]:
    """Why game processes failed once the run is over. A game plays until its server's `shutdown` (the run's
    end), then reports what it played on `out`; one that failed reports its error there instead, or dies
    before it can say anything (its exit code, its traceback on stderr)."""
    reports = []
    for _ in (p for p in players if p.exitcode == 0):  # each of these put its report before it exited
        try:
            reports.append(out.get(timeout=1.0))
        except Empty:
            break
    crashed = [p.exitcode for p in players if p.exitcode not in (None, 0)]
    return [r["error"] for r in reports if "error" in r] + [
        f"a game process exited with code {code} (its traceback is on stderr)" for code in crashed
    ]


def served_seed(config: Path, seed: int, games: int, limit_s: float, extra: tuple[str, ...]) -> dict:
    """One `tandem up` in serve mode with `games` game processes (one game each), from launch to exit."""
    from tandem.client.game import ServerGone, find_endpoint

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    players: list = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tandem-game-solve-") as tmp:
        args = up_args(config, f"{tmp}/run", seed, limit_s, ("actors.mode='serve'", *extra))
        started, started_unix = time.monotonic(), time.time()
        up = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        out = err = ""
        try:
            # the server binds once the run has started; the limit is for learning, not for this
            endpoint = find_endpoint(f"{tmp}/run", timeout_s=120.0)
            # each game is a process of its own, as game executables would be; they play until the run ends
            players = [
                ctx.Process(target=player, args=(endpoint, limit_s + 60, queue), daemon=True) for _ in range(games)
            ]
            for p in players:
                p.start()
            out, err = up.communicate(timeout=limit_s + 60)
            failed = game_errors(players, queue)
        except ServerGone:
            out, err = "", "the action server never wrote its address"
        except subprocess.TimeoutExpired:
            pass  # the run outlived its own stop.seconds by a minute: ended below, counted as unsolved
        finally:
            if up.poll() is None:  # Ctrl-C, a hung run or no server: the run (its own session) ends with us
                up.send_signal(signal.SIGTERM)
                try:
                    more_out, more_err = up.communicate(timeout=60)
                    out, err = out + (more_out or ""), err + (more_err or "")
                except subprocess.TimeoutExpired:
                    up.kill()
                    up.communicate(timeout=10)
            for p in players:  # the server is gone: its games end with it
                p.terminate()
            for p in players:
                p.join(timeout=10)
        wall = time.monotonic() - started
    # a run whose games failed is no measure of learning through the server: the record says why
    return {**solve_record(seed, up.returncode, out, err, started_unix, wall), "game_errors": failed}


@click.command("game-solve")
@example_config_option("game_cartpole.toml", "The run; it must set stop.eval_return and have an evaluator.")
@click.option(
    "--games",
    default=8,
    show_default=True,
    help="Game processes in the served runs (the built-in actor steps as many envs).",
)
@click.option("--seeds", default=3, show_default=True, help="Seeds 0..N-1: one served and one built-in run each.")
@click.option(
    "--limit-s", default=180.0, show_default=True, help="Give up on a run after this long (counted as unsolved)."
)
@bench_set_option
@json_option
@quick_option("One seed, 2 games, at most 30 s")
def game_solve_cmd(
    config: Path, games: int, seeds: int, limit_s: float, overrides: tuple[str, ...], as_json: bool, quick: bool
) -> None:
    """Median time from `tandem up` to the evaluation target with games served vs the built-in actor."""
    if games < 1:
        raise click.BadParameter("at least 1", param_hint="--games")
    if quick:
        seeds, games, limit_s = 1, 2, min(limit_s, 30.0)
    say, served, builtin = progress(as_json), [], []
    for seed in range(seeds):
        served.append(served_seed(config, seed, games, limit_s, overrides))
        # the same run with the actor stepping `games` CartPole envs itself
        builtin.append(run_seed(config, seed, limit_s, (*overrides, "actors.mode='env'", f"env.num_envs={games}")))
        for name, r in (("served", served[-1]), ("built-in", builtin[-1])):
            say(
                f"seed {seed} {name:8}: {r['solve_s']:7.2f} s  {'solved' if r['solved'] else 'NOT solved'}  "
                f"env steps {r['env_steps']}  updates {r['updates']}  ({r['reason']})"
            )
        for error in served[-1]["game_errors"]:
            say(f"seed {seed} served  : a game failed: {error}")
    record = {
        "benchmark": "game-solve",
        "quick": quick,
        "config": str(config),
        "games": games,
        "limit_s": limit_s,
        "served": served,
        "builtin": builtin,
        "served_median_s": median_solve_s(served, limit_s),
        "builtin_median_s": median_solve_s(builtin, limit_s),
        "solved": {"served": sum(r["solved"] for r in served), "builtin": sum(r["solved"] for r in builtin)},
    }
    summary = (
        f"median time to the evaluation target over {seeds} seeds: served ({games} game processes) "
        f"{record['served_median_s']:.1f} s, built-in actor ({games} envs) {record['builtin_median_s']:.1f} s"
    )
    finish(record, as_json, [summary])
