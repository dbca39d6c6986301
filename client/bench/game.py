"""`tandem bench game`: a cheap game's frames/s alone and served while its learner trains; latency and batches."""

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

import click
import numpy as np

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "game_cartpole.toml"
DRIVERS_MAX = 4  # processes that drive the games of one phase (each drives its share, all in lock-step)


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

    from protocol import sockets
    from protocol.game import GameAction, GameHello, GameStep, decode_game

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
                sockets.send_frames(sock, GameStep(request, streams[g], obs[g], reward, done, truncated).to_frames(),
                                    timeout_ms=10_000)
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
        sockets.close_context(ctx, linger_ms=0)


def server_counters(run_dir: Path) -> dict:
    """The action server's heartbeat counters, with the learner's `updates` added."""
    status = subprocess.run([sys.executable, "-m", "client", "status", "--run-dir", str(run_dir), "--json"],
                            capture_output=True, text=True, timeout=30)
    data = json.loads(status.stdout) if status.returncode in (0, 5) and status.stdout else {}
    rows = {p["name"]: p["counters"] for p in data.get("processes", [])}
    return {**rows.get("actor-0", {}), "updates": rows.get("learner-default", {}).get("updates")}


def phase(endpoint: str, run_dir: Path, games: int, seconds: float, heartbeat_s: float) -> dict:
    """`games` games for `seconds`; their frames/s, action latency p50/p99 and the server's mean batch."""
    before = server_counters(run_dir)
    drivers = min(DRIVERS_MAX, games)
    queue: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=drive, args=(endpoint, games // drivers + (i < games % drivers), seconds, queue))
             for i in range(drivers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise click.ClickException(f"{games} games: {errors[0]}")
    time.sleep(2 * heartbeat_s)  # the server's last counters of this phase reach the supervisor
    after = server_counters(run_dir)
    requests = after.get("serve_requests", 0) - before.get("serve_requests", 0)
    inferences = after.get("serve_inferences", 0) - before.get("serve_inferences", 0)
    latencies = np.concatenate([np.asarray(r["latencies_ms"]) for r in results])
    frames = sum(r["frames"] for r in results)
    return {"games": games, "frames_per_s": round(frames / seconds, 1),
            "frames_per_s_per_game": round(frames / seconds / games, 1),
            "latency_p50_ms": round(float(np.percentile(latencies, 50)), 3),
            "latency_p99_ms": round(float(np.percentile(latencies, 99)), 3),
            "batch_mean": round(requests / inferences, 2) if inferences else None,
            "learner_updates": (after.get("updates") or 0) - (before.get("updates") or 0)}


@click.command("game")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A serve-mode run.  [default: examples/game_cartpole.toml of a checkout]")
@click.option("--games", "counts", default="1,8,64", show_default=True, help="Game counts, comma-separated.")
@click.option("--seconds", default=10.0, show_default=True, help="Length of each phase.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="1 and 8 games, 3 s each (a smoke run, not a figure to quote).")
def game_cmd(config: Path | None, counts: str, seconds: float, as_json: bool, quick: bool) -> None:
    """A game's frames/s alone vs served while the learner trains; action latency p50/p99 and batch sizes with 1, 8, 64 games."""
    from client.game import find_endpoint

    config = config or DEFAULT_CONFIG
    if not config.is_file():
        raise click.UsageError("no examples/ beside this installation: pass --config PATH (a serve-mode config)")
    game_counts = [int(c) for c in counts.split(",") if c.strip()]
    if quick:
        game_counts, seconds = [c for c in game_counts if c <= 8][:2] or [1], 3.0
    base = alone(min(seconds, 5.0))
    heartbeat_s = 0.5
    with tempfile.TemporaryDirectory(prefix="tandem-bench-game-") as tmp:
        run_dir = Path(tmp) / "run"
        total = len(game_counts) * (seconds + 10) + 120
        up = subprocess.Popen([sys.executable, "-m", "client", "up", str(config), "--json", "--set", f"run.dir='{run_dir}'",
                               "--set", "eval.enabled=false", "--set", f"stop.seconds={total}",
                               "--set", f"supervisor.heartbeat_interval_s={heartbeat_s}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            endpoint = find_endpoint(run_dir, timeout_s=120)
            phases = [phase(endpoint, run_dir, n, seconds, heartbeat_s) for n in game_counts]
        finally:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait(timeout=10)
    one = phases[0]
    record = {"benchmark": "game", "quick": quick, "config": str(config), "seconds": seconds,
              "alone_frames_per_s": round(base, 1), "phases": phases,
              # one game's frame rate served (learner training beside it) as a share of the same loop alone
              "served_share_of_alone": round(one["frames_per_s_per_game"] / base, 4) if base else None,
              "median_latency_p50_ms": statistics.median(p["latency_p50_ms"] for p in phases)}
    if as_json:
        click.echo(json.dumps(record))
        return
    click.echo(f"the game alone: {base:.0f} frames/s")
    for p in phases:
        click.echo(f"{p['games']} game(s), served while the learner trains: {p['frames_per_s']:.0f} frames/s "
                   f"({p['frames_per_s_per_game']:.0f} per game), action latency p50 {p['latency_p50_ms']} ms "
                   f"p99 {p['latency_p99_ms']} ms, mean batch {p['batch_mean']}, {p['learner_updates']} learner updates meanwhile")
