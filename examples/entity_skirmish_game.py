"""Skirmish played by game processes that run their own loop, each step's units and enemies sent as entities.

    tandem up examples/game_skirmish.toml            # learner + action server for entity observations
    python examples/entity_skirmish_game.py --run-dir runs/game-skirmish --games 2

The game sends each entity type's rows as they are this step (any number up to env.max_entities), its global
features and its masks; it gets back one action per head: an int for a global head, an array with one entry
per unit for `target` and `stance` (PROTOCOL.md 7.6).
"""

from __future__ import annotations

import argparse
import sys
import time

from entity_skirmish import Skirmish

from tandem.client.game import Agent
from tandem.client.game_sessions import play_sessions, run_game_processes


def play(index: int, endpoint: str | None, run_dir: str, seconds: float, timeout_s: float) -> int:
    game = Skirmish()
    episodes = steps = 0
    total = 0.0

    def session(address: str, deadline: float) -> None:
        nonlocal episodes, steps, total
        with Agent(address, game=f"skirmish-{index}", timeout_s=timeout_s) as agent:
            obs, _ = game.reset(seed=index * 100_003 + episodes)
            reward, truncated = 0.0, False
            while time.monotonic() < deadline:
                action = agent.act(obs, reward, False, truncated)
                if action is None:  # the episode ended: start the next one
                    episodes += 1
                    obs, _ = game.reset()
                    reward, truncated = 0.0, False
                    continue
                obs, reward, _, truncated, _ = game.step(action)
                steps += 1
                total += reward

    play_sessions(session, run_dir, seconds, f"game {index}", endpoint)
    sys.stdout.write(f"game {index}: {episodes} episodes, {steps} steps, mean reward {total / max(steps, 1):.3f}\n")
    sys.stdout.flush()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/game-skirmish", help="The run's directory (the server's address).")
    parser.add_argument("--endpoint", default=None, help="The server's address (tcp://...), instead of --run-dir.")
    parser.add_argument("--games", type=int, default=2, help="Game processes to start.")
    parser.add_argument("--seconds", type=float, default=120.0, help="How long each game plays.")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="Longest wait for one action.")
    args = parser.parse_args()
    each = [(i, args.endpoint, args.run_dir, args.seconds, args.timeout_s) for i in range(args.games)]
    return run_game_processes(play, each)


if __name__ == "__main__":
    sys.exit(main())
