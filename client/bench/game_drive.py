"""The game side of `tandem bench game` and `game-solve`: processes that play CartPole games against an action
server (or a raw ZeroMQ echo), the echo itself, and the game's own frame rate with no server at all."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from queue import Empty

import click
import numpy as np

DRIVERS_MAX = 2  # processes that drive the games of one phase (each its share, in lock-step): one per core here


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


def echo(endpoint: str, bound: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    """The baseline: a raw ZeroMQ ROUTER that sends every message straight back, as fast as pyzmq can."""
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(endpoint)
    bound.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    while not stop.is_set():
        if sock.poll(100):
            while True:
                try:
                    sock.send_multipart(sock.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
    ctx.destroy(linger=0)


def drive(
    endpoint: str,
    games: int,
    seconds: float,
    out: multiprocessing.Queue,
    echoed: bool = False,
    start: multiprocessing.Barrier | None = None,
) -> None:
    """`games` CartPole games, each its own connection, stepped in lock-step: every game sends its step, then
    each waits for its reply (as many games on one clock would); puts its frames and client-side latencies
    and CPU seconds (or its error) on `out`. `tandem bench game-solve` plays its games with this too.

    Against the echo (`echoed`) there is no hello and the reply is the step itself: the game picks a random
    action. Otherwise the same messages go and come back, an episode's end included. With `start`, the
    drivers of a phase begin their `seconds` together."""
    import gymnasium as gym

    from tandem.protocol import game_socket, sockets
    from tandem.protocol.game import GameAction, GameBye, GameError, GameHello, GameStep
    from tandem.protocol.game_plain import decode_reply

    def reply_to(sock) -> object:
        frames = game_socket.recv_within(sock, 30.0)  # as the client library waits (client/game.py)
        if frames is None:
            raise RuntimeError("no reply within 30 s")
        return decode_reply(frames)

    ctx, rng = sockets.new_context(), np.random.default_rng(0)
    socks, envs, obs, streams = [], [], [], []
    try:
        for g in range(games):
            socks.append(sockets.game_dealer(ctx, endpoint))
            if not echoed:
                sockets.send_frames(socks[-1], GameHello(1, f"bench-{g}").to_frames(), timeout_ms=10_000)
            streams.append(g + 1 if echoed else reply_to(socks[-1]).streams[0])
            envs.append(gym.make("CartPole-v1"))
            obs.append(envs[-1].reset(seed=g)[0])
        pending = [(0.0, False, False)] * games
        latencies, frames, request, stopped = [], 0, 2, False
        if start is not None:
            start.wait(timeout=120)  # every driver of the phase measures over the same seconds
        cpu_started, end = time.process_time(), time.monotonic() + seconds
        while time.monotonic() < end and not stopped:
            sent = []
            for g, sock in enumerate(socks):
                reward, done, truncated = pending[g]
                sent.append(time.monotonic())
                if not game_socket.send_now(
                    sock, GameStep(request, streams[g], obs[g], reward, done, truncated).to_frames()
                ):
                    raise RuntimeError("a step could not be queued")
            for g, sock in enumerate(socks):
                reply = reply_to(sock)
                latencies.append((time.monotonic() - sent[g]) * 1000.0)
                ended = pending[g][1] or pending[g][2]
                if echoed:
                    action = None if ended else int(rng.integers(2))
                elif isinstance(reply, GameAction):
                    action = None if reply.action is None else int(reply.action[0])
                elif isinstance(reply, GameError) and reply.code == "shutdown":
                    stopped = True  # the server stopped (the end of the run, or a restart): this game is over
                    continue
                else:
                    raise RuntimeError(f"refused: {reply}")
                if action is None:
                    obs[g], pending[g] = envs[g].reset()[0], (0.0, False, False)
                    continue
                obs[g], reward, done, truncated, _ = envs[g].step(action)
                pending[g] = (float(reward), bool(done), bool(truncated))
                frames += 1
            request += 1
        cpu_s = time.process_time() - cpu_started
        out.put({"frames": frames, "latencies_ms": latencies, "server_stopped": stopped, "cpu_s": cpu_s})
    except Exception as exc:  # reported, not raised: the parent says which phase failed
        out.put({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        if not echoed:
            for sock in socks:  # the server ends these streams now rather than at its timeout
                sockets.send_frames(sock, GameBye(0, "bench phase over").to_frames(), timeout_ms=1000)
        sockets.close_context(ctx, linger_ms=1000)


def agent_game(
    endpoint: str, index: int, seconds: float, out: multiprocessing.Queue, start: multiprocessing.Barrier
) -> None:
    """One CartPole game as a game process that follows the spec plays it: its own loop, its own Agent (the public
    client library, client/game.py: one DEALER), an action asked for every frame. Puts its frames, client-side
    latencies and CPU seconds (its ZeroMQ I/O thread's included) on `out`, or its error."""
    import gymnasium as gym

    from tandem.client.game import Agent, AgentError

    try:
        env = gym.make("CartPole-v1")
        obs, reward, done, truncated = env.reset(seed=index)[0], 0.0, False, False
        latencies, frames, stopped = [], 0, False
        with Agent(endpoint, game=f"bench-{index}", timeout_s=30.0) as agent:
            start.wait(timeout=120)  # every game of the phase measures over the same seconds
            cpu_started, end = time.process_time(), time.monotonic() + seconds
            while (sent := time.monotonic()) < end:
                try:
                    action = agent.act(obs, reward, done, truncated)
                except AgentError as exc:
                    if exc.code != "shutdown":
                        raise
                    stopped = True  # the run ended (or the server restarted): this game is over
                    break
                latencies.append((time.monotonic() - sent) * 1000.0)
                if action is None:  # the episode ended: the next act starts the next one
                    obs, reward, done, truncated = env.reset()[0], 0.0, False, False
                    continue
                obs, reward, done, truncated, _ = env.step(action)
                frames += 1
            cpu_s = time.process_time() - cpu_started
        out.put({"frames": frames, "latencies_ms": latencies, "server_stopped": stopped, "cpu_s": cpu_s})
    except Exception as exc:  # reported, not raised: the parent says which phase failed
        out.put({"error": f"{type(exc).__name__}: {exc}"})


def play(
    endpoint: str,
    games: int,
    seconds: float,
    echoed: bool = False,
    processes: bool = False,
    started: Callable[[], None] | None = None,
) -> list[dict]:
    """Drive `games` games for `seconds` from up to DRIVERS_MAX processes (`processes`: each game a process of
    its own, playing with the client library, or against the echo with `drive`); each process's report.
    `started` runs here when the games begin their `seconds`."""
    drivers = games if processes else min(DRIVERS_MAX, games)
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue = ctx.Queue()
    start = ctx.Barrier(drivers + (started is not None))
    if processes and not echoed:
        procs = [ctx.Process(target=agent_game, args=(endpoint, i, seconds, queue, start)) for i in range(drivers)]
    else:
        procs = [
            ctx.Process(
                target=drive,
                args=(endpoint, games // drivers + (i < games % drivers), seconds, queue),
                kwargs={"echoed": echoed, "start": start},
            )
            for i in range(drivers)
        ]
    for p in procs:
        p.start()
    try:
        if started is not None:
            try:
                start.wait(timeout=120)
            except threading.BrokenBarrierError:
                pass  # a game failed before it began: its report below says why
            else:
                started()
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
    errors += ["the action server stopped during the phase" for r in results if r.get("server_stopped")]
    if errors:
        raise click.ClickException(f"{games} games{' (echo)' if echoed else ''}: {errors[0]}")
    return results


def end_echo(stop: multiprocessing.Event, proc: multiprocessing.Process) -> None:
    """Stop the echo process started with `stop`: it ends within its poll; one that does not is killed."""
    stop.set()
    if proc.is_alive():
        proc.join(timeout=10)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)
