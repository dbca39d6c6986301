"""Self-play seats: in each world and episode, one seat plays the learning policy and the others an opponent.

The learning seat is drawn anew for every episode among the agents the learning policy plays (a two-player
game's first and second mover alike), and only that seat's turns are recorded for training. The opponent, a
pooled version of the same policy (or None: the live weights, before the pool has any), plays every other
seat of the world for the whole episode. When the episode ends, the learning seat's return against the best
of the others scores the game: 1 a win, 0.5 a draw, 0 a loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


class SelfPlaySeats:
    """Who plays which seat of each of K worlds, and the games' results (`draw_opponent() -> version or None`,
    `scored(version, score)` told of each finished game)."""

    def __init__(
        self,
        policy: str,
        worlds: int,
        seed: int,
        draw_opponent: Callable[[], int | None],
        scored: Callable[[int | None, float], None],
    ):
        self.policy, self.draw_opponent, self.scored = policy, draw_opponent, scored
        self.rng = np.random.default_rng(seed)
        self.learner_seat: list[str | None] = [None] * worlds
        self.opponent: list[int | None] = [None] * worlds
        self.returns: list[dict[str, float]] = [{} for _ in range(worlds)]

    def new_episode(self, k: int, seats: Sequence[str]) -> None:
        """World k starts an episode; `seats` are its agents the learning policy plays."""
        self.learner_seat[k] = seats[self.rng.integers(len(seats))] if seats else None
        self.opponent[k] = self.draw_opponent()
        self.returns[k] = {}

    def learning(self, k: int, agent: str) -> bool:
        """True for the seat whose turns are the learning policy's (recorded and sent for training)."""
        return agent == self.learner_seat[k]

    def agent_ended(self, k: int, agent: str, episode_return: float) -> None:
        self.returns[k][agent] = episode_return

    def episode_over(self, k: int) -> float | None:
        """World k's game has ended: its score for the learning side (None when that seat never ended)."""
        seat, returns = self.learner_seat[k], self.returns[k]
        if seat is None or seat not in returns:
            return None
        others = [value for agent, value in returns.items() if agent != seat]
        best_other = max(others) if others else 0.0
        mine = returns[seat]
        score = 1.0 if mine > best_other else 0.5 if mine == best_other else 0.0
        self.scored(self.opponent[k], score)
        return score
