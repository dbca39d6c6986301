"""A game that runs its own loop: CartPole stepped on the game's own clock, its actions asked of Tandem.

    tandem up examples/game_cartpole.toml            # learner + action server
    python examples/cartpole_game.py --run-dir runs/game-cartpole --games 4

Each game is a process of its own (as separate game executables would be); it finds the server's address
in the run directory (or takes --endpoint) and plays episodes until --seconds have passed. When its server
goes away it reads the run directory again: it reconnects to a restarted server and stops when the run is
over (given only --endpoint, it stops when its server says it stops).
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym

from tandem.client.game import Agent
from tandem.client.game_sessions import play_sessions, run_game_processes


def play(index: int, endpoint: str | None, run_dir: str, seconds: float, fps: float, timeout_s: float) -> int:
    """One game: its own loop, its own clock (`fps` frames a second; 0 is as fast as it can)."""
    env = gym.make("CartPole-v1")
    frame_s = 1.0 / fps if fps > 0 else 0.0
    episodes = steps = 0

    def session(address: str, deadline: float) -> None:
        nonlocal episodes, steps
        with Agent(address, game=f"cartpole-{index}", timeout_s=timeout_s) as agent:
            obs, _ = env.reset(seed=index * 100_003 + episodes)
            reward, done, truncated = 0.0, False, False
            while time.monotonic() < deadline:
                tick = time.monotonic()
                action = agent.act(obs, reward, done, truncated)
                if action is None:  # the episode ended: start the next one
                    episodes += 1
                    obs, _ = env.reset()
                    reward, done, truncated = 0.0, False, False
                    continue
                obs, reward, done, truncated, _ = env.step(action)
                steps += 1
                if frame_s:
                    time.sleep(max(0.0, tick + frame_s - time.monotonic()))

    play_sessions(session, run_dir, seconds, f"game {index}", endpoint)
    # One write for the whole line: the games are processes sharing one stdout, and print() writes the text
    # and its newline separately (unbuffered, two games' lines ran together).
    sys.stdout.write(f"game {index}: {episodes} episodes, {steps} steps\n")
    sys.stdout.flush()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run-dir", default="runs/game-cartpole", help="The run's directory (the server's address is there)."
    )
    parser.add_argument("--endpoint", default=None, help="The server's address (tcp://...), instead of --run-dir.")
    parser.add_argument("--games", type=int, default=2, help="Game processes to start.")
    parser.add_argument("--seconds", type=float, default=120.0, help="How long each game plays.")
    parser.add_argument(
        "--fps", type=float, default=0.0, help="Frames a second of each game's clock (0: as fast as it can)."
    )
    parser.add_argument("--timeout-s", type=float, default=10.0, help="Longest wait for one action.")
    args = parser.parse_args()
    each = [(i, args.endpoint, args.run_dir, args.seconds, args.fps, args.timeout_s) for i in range(args.games)]
    return run_game_processes(play, each)


if __name__ == "__main__":
    sys.exit(main())
