"""Ratings of a self-play learner's policy and of its pooled opponents, from the games its actors report.

OpenSkill's Plackett-Luce model (the `openskill` package), one rating for the learning policy as it goes and
one for each pooled version. A version enters the pool with the learning policy's rating at that moment (it
is that policy, then), so the learning policy's rating rises as it beats what it was. The model's `tau` keeps
the learning policy's uncertainty from shrinking to nothing, since it keeps changing.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

import numpy as np

from tandem.daemons.runtime.reporter import TRAIN_PREFIX

RECENT_GAMES = 500  # the win rate reported is over the last this many games


class PoolRatings:
    """`record(games)` from the intake thread, `counters()` from the training thread: one lock between them."""

    def __init__(self) -> None:
        from openskill.models import PlackettLuce

        self.model = PlackettLuce()
        self.learner = self.model.rating(name="learning")
        self.pool: dict[int, object] = {}
        self.recent: deque[float] = deque(maxlen=RECENT_GAMES)
        self.games = 0
        self.lock = threading.Lock()

    def pooled(self, version: int) -> None:
        """`version` joined the pool: it starts from the learning policy's rating now."""
        with self.lock:
            self.pool[version] = self.model.rating(mu=self.learner.mu, sigma=self.learner.sigma, name=str(version))

    def forget(self, keep: Iterable[int]) -> None:
        """Drop the ratings of versions no longer in the pool."""
        keep = set(keep)
        with self.lock:
            for version in [v for v in self.pool if v not in keep]:
                del self.pool[version]

    def record(self, games: Iterable[tuple[int, float]]) -> None:
        """Each (opponent version, the learning side's score: 1 win, 0.5 draw, 0 loss); -1 is the live policy
        itself (played before the pool had any version) and moves no rating."""
        with self.lock:
            for version, score in games:
                self.games += 1
                self.recent.append(score)
                opponent = self.pool.get(version)
                if opponent is None:
                    continue
                ranks = [0, 1] if score == 1.0 else [1, 0] if score == 0.0 else [0, 0]
                [[learner], [opponent]] = self.model.rate([[self.learner], [opponent]], ranks=ranks)
                self.learner, self.pool[version] = learner, opponent

    def counters(self) -> dict[str, float]:
        """The learning policy's rating (mu, and the conservative ordinal mu - 3 sigma) and its recent win rate,
        named as training diagnostics (train_...) so the run's curves, `tandem plot`, TensorBoard and W&B have
        them; and the games rated."""
        with self.lock:
            out = {
                f"{TRAIN_PREFIX}rating": float(self.learner.mu),
                f"{TRAIN_PREFIX}rating_ordinal": float(self.learner.ordinal()),
                "rated_games": self.games,
            }
            if self.recent:
                out[f"{TRAIN_PREFIX}pool_win_rate"] = float(np.mean(self.recent))
            return out
