"""`tandem bench game`: a cheap game's frames/s served beside an idle learner and one training flat out."""

from __future__ import annotations

import json
import multiprocessing
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from queue import Empty

import click
import numpy as np

from tandem.client.bench.isolation import IDLE, TRAINING

# The served run, pinned here (an installed package has no examples/): CartPole-v1 games served by one
# action server, a DQN learner. DQN, because its replay lets the same config either never train (IDLE: the
# ring must fill first) or train as fast as it can on what the games send (TRAINING: 64 samples per insert).
BASE = [
    "run.name='bench-game'",
    "env.id='CartPole-v1'",
    "actors.mode='serve'",
    "actors.count=1",
    "actors.unroll_length=32",
    "algorithm.name='double_dqn'",
    "algorithm.batch_size=256",
    "algorithm.target_update_interval=100",
    "eval.enabled=false",
    "learner.replay_min_size=1000",
]
HEARTBEAT_S = 0.5
DRIVERS_MAX = 4  # processes that drive the games of one phase (each drives its share, all in lock-step)
TARGET_SHARE = 0.9  # one game keeps this share of its frame rate when the learner starts training flat out


def alone(seconds: float) -> float:
    """Frames/s of the game's own loop with a random policy and no server: what a game does without Tandem."""
    import gymnasium as gym

    env, rng = gym.make("CartPole-v1"), np.random.default_rng(0)
    env.reset(seed=0)
    frames, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        _, _, done, truncated, _ = env.step(int(rng.integers(2)))
        frames += 1
        if done or truncated:
            env.reset()
    return frames / seconds


def drive(endpoint: str, games: int, seconds: float, out: multiprocessing.Queue) -> None:
    """`games` CartPole games, each its own connection, stepped in lock-step: every game sends its step, then
    each waits for its action (as many games on one clock would); frames and client-side latencies."""
    import gymnasium as gym

    from tandem.protocol import sockets
    from tandem.protocol.game import GameAction, GameBye, GameHello, GameStep, decode_game

    ctx = sockets.new_context()
    socks, envs, obs, streams = [], [], [], []
    try:
        for g in range(games):
            sock = sockets.game_dealer(ctx, endpoint)
            sockets.send_frames(sock, GameHello(1, f"bench-{g}").to_frames(), timeout_ms=10_000)
            welcome = decode_game(sockets.recv_frames(sock, 30_000))
            socks.append(sock)
            streams.append(welcome.streams[0])
            envs.append(gym.make("CartPole-v1"))
            obs.append(envs[-1].reset(seed=g)[0])
        pending = [(0.0, False, False)] * games
        latencies, frames, request, end = [], 0, 2, time.monotonic() + seconds
        while time.monotonic() < end:
            sent = []
            for g, sock in enumerate(socks):
                reward, done, truncated = pending[g]
                sent.append(time.monotonic())
                sockets.send_frames(
                    sock, GameStep(request, streams[g], obs[g], reward, done, truncated).to_frames(), timeout_ms=10_000
                )
            for g, sock in enumerate(socks):
                frames_in = sockets.recv_frames(sock, 30_000)
                if frames_in is None:
                    raise RuntimeError("no reply within 30 s")
                reply = decode_game(frames_in)
                latencies.append((time.monotonic() - sent[g]) * 1000.0)
                if not isinstance(reply, GameAction):
                    raise RuntimeError(f"refused: {reply}")
                if reply.action is None:
                    obs[g], pending[g] = envs[g].reset()[0], (0.0, False, False)
                    continue
                obs[g], reward, done, truncated, _ = envs[g].step(int(reply.action[0]))
                pending[g] = (float(reward), bool(done), bool(truncated))
                frames += 1
            request += 1
        out.put({"frames": frames, "latencies_ms": latencies})
    except Exception as exc:  # reported, not raised: the parent says which phase failed
        out.put({"error": str(exc)})
    finally:
        for sock in socks:  # the server ends these streams now rather than at its timeout
            sockets.send_frames(sock, GameBye(0, "bench phase over").to_frames(), timeout_ms=1000)
        sockets.close_context(ctx, linger_ms=1000)


def server_counters(run_dir: Path) -> dict:
    """The action server's heartbeat counters, with the learner's `updates` added."""
    status = subprocess.run(
        [sys.executable, "-m", "tandem", "status", "--run-dir", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    data = json.loads(status.stdout) if status.returncode in (0, 5) and status.stdout else {}
    rows = {p["name"]: p["counters"] for p in data.get("processes", [])}
    return {**rows.get("actor-0", {}), "updates": rows.get("learner-default", {}).get("updates") or 0}


def play(endpoint: str, games: int, seconds: float) -> list[dict]:
    """Drive `games` games for `seconds` from up to DRIVERS_MAX processes; each driver's frames and latencies."""
    drivers = min(DRIVERS_MAX, games)
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue = ctx.Queue()
    procs = [
        ctx.Process(target=drive, args=(endpoint, games // drivers + (i < games % drivers), seconds, queue))
        for i in range(drivers)
    ]
    for p in procs:
        p.start()
    try:
        results, deadline = [], time.monotonic() + seconds + 120
        while len(results) < len(procs):
            try:
                results.append(queue.get(timeout=1.0))
            except Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead or time.monotonic() > deadline:
                    raise click.ClickException(
                        f"{games} games: a driver process {'exited ' + str(dead[0]) if dead else 'hung'}"
                    ) from None
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise click.ClickException(f"{games} games: {errors[0]}")
    return results


def phase(endpoint: str, run_dir: Path, games: int, seconds: float) -> dict:
    """`games` games for `seconds`; their frames/s, action latency p50/p99, the server's mean batch, updates."""
    before = server_counters(run_dir)
    results = play(endpoint, games, seconds)
    time.sleep(2 * HEARTBEAT_S)  # the server's last counters of this phase reach the supervisor
    after = server_counters(run_dir)
    requests = after.get("serve_requests", 0) - before.get("serve_requests", 0)
    inferences = after.get("serve_inferences", 0) - before.get("serve_inferences", 0)
    latencies = np.concatenate([np.asarray(r["latencies_ms"]) for r in results])
    frames = sum(r["frames"] for r in results)
    return {
        "games": games,
        "frames_per_s": round(frames / seconds, 1),
        "frames_per_s_per_game": round(frames / seconds / games, 1),
        "latency_p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "latency_p99_ms": round(float(np.percentile(latencies, 99)), 3),
        "batch_mean": round(requests / inferences, 2) if inferences else None,
        "learner_updates_per_s": round((after["updates"] - before["updates"]) / (seconds + 2 * HEARTBEAT_S), 1),
    }


def served_run(training: bool, counts: list[int], seconds: float) -> list[dict]:
    """One `tandem up` of the pinned served run (learner idle or training flat out); a phase per game count."""
    from tandem.client.game import find_endpoint
    from tandem.daemons.config import apply_overrides, config_from_dict, render_toml

    with tempfile.TemporaryDirectory(prefix="tandem-bench-game-") as tmp:
        run_dir, config = Path(tmp) / "run", Path(tmp) / "game.toml"
        overrides = [
            *BASE,
            *(TRAINING if training else IDLE),
            f"run.dir='{run_dir}'",
            f"supervisor.heartbeat_interval_s={HEARTBEAT_S}",
            f"stop.seconds={len(counts) * (seconds + 10) + 180}",
        ]
        config.write_text(render_toml(config_from_dict(apply_overrides({}, overrides))))
        up = subprocess.Popen(
            [sys.executable, "-m", "tandem", "up", str(config), "--json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            endpoint = find_endpoint(run_dir, timeout_s=120)
            if training:  # fill the replay until the learner trains: the phases then measure it training
                deadline = time.monotonic() + 120
                while server_counters(run_dir)["updates"] == 0:
                    if time.monotonic() > deadline:
                        raise click.ClickException("the learner did not start training within 120 s")
                    play(endpoint, 1, 2.0)
                time.sleep(2 * HEARTBEAT_S)  # the warm-up's last counters arrive before the first phase's `before`
            phases = [phase(endpoint, run_dir, n, seconds) for n in counts]
            if not training and server_counters(run_dir)["updates"]:
                raise click.ClickException("the idle learner trained: its replay filled within the phases")
            return phases
        finally:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait(timeout=10)


def median_phases(runs: list[list[dict]]) -> list[dict]:
    """Per game count, the median of each figure over the repeats."""
    merged = []
    for same_count in zip(*runs):
        row = {"games": same_count[0]["games"]}
        for key in same_count[0]:
            values = [p[key] for p in same_count if p[key] is not None]
            if key != "games":
                row[key] = round(statistics.median(values), 3) if values else None
        merged.append(row)
    return merged


@click.command("game")
@click.option("--games", "counts", default="1,8,64", show_default=True, help="Game counts, comma-separated.")
@click.option("--seconds", default=10.0, show_default=True, help="Length of each phase.")
@click.option(
    "--repeats", default=3, show_default=True, help="Idle and training runs, alternated; medians are reported."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="1 and 8 games, 3 s each, one repeat (a smoke run, not a figure to quote).")
def game_cmd(counts: str, seconds: float, repeats: int, as_json: bool, quick: bool) -> None:
    """Served games' frames/s with the learner training flat out as a share of that with it idle; latency, batches."""
    try:
        game_counts = [int(c) for c in counts.split(",") if c.strip()]
    except ValueError:
        raise click.BadParameter(f"{counts!r}: expected game counts such as 1,8,64", param_hint="--games") from None
    if not game_counts or min(game_counts) < 1:
        raise click.BadParameter(f"{counts!r}: expected positive game counts such as 1,8,64", param_hint="--games")
    if quick:
        game_counts, seconds, repeats = [c for c in game_counts if c <= 8][:2] or [1], 3.0, 1
    base = alone(min(seconds, 5.0))
    idle_runs, training_runs = [], []
    for r in range(repeats):  # alternated, so that a change in the machine's load falls on both alike
        idle_runs.append(served_run(False, game_counts, seconds))
        training_runs.append(served_run(True, game_counts, seconds))
        if not as_json:
            click.echo(
                f"repeat {r}: "
                + ", ".join(
                    f"{i['games']} games {i['frames_per_s']:.0f} -> {t['frames_per_s']:.0f} frames/s"
                    for i, t in zip(idle_runs[-1], training_runs[-1])
                )
            )
    idle, training = median_phases(idle_runs), median_phases(training_runs)
    # each repeat's ratio from its own pair of runs, then the median: a pair shares the machine's load
    shares = [
        round(
            statistics.median(t[k]["frames_per_s"] / i[k]["frames_per_s"] for i, t in zip(idle_runs, training_runs)), 4
        )
        for k in range(len(game_counts))
    ]
    for row, share in zip(training, shares):
        row["share_of_idle"] = share
    one = shares[game_counts.index(1)] if 1 in game_counts else None
    record = {
        "benchmark": "game",
        "quick": quick,
        "seconds": seconds,
        "repeats": repeats,
        "alone_frames_per_s": round(base, 1),
        "idle": idle,
        "training": training,
        "target": {"one_game_share_min": TARGET_SHARE},
        "met": one is not None and one >= TARGET_SHARE,
    }
    if as_json:
        click.echo(json.dumps(record))
        return
    click.echo(f"the game alone, no server: {base:.0f} frames/s")
    for i, t in zip(idle, training):
        click.echo(
            f"{i['games']} game(s): learner idle {i['frames_per_s']:.0f} frames/s, p50 {i['latency_p50_ms']} ms "
            f"p99 {i['latency_p99_ms']} ms, batch {i['batch_mean']} | learner training "
            f"({t['learner_updates_per_s']:g} updates/s) {t['frames_per_s']:.0f} frames/s "
            f"({t['share_of_idle']:.3f}x), p50 {t['latency_p50_ms']} ms p99 {t['latency_p99_ms']} ms, "
            f"batch {t['batch_mean']}"
        )
    if one is not None:
        click.echo(
            f"one game keeps {one:.3f}x of its frame rate while the learner trains (target >= {TARGET_SHARE}): "
            f"{'met' if record['met'] else 'NOT met'}"
        )
