"""Ratings of a self-play learner's policy and of its pooled opponents, from the games its actors report.

OpenSkill's Plackett-Luce model (the `openskill` package), one rating for the learning policy as it goes and
one for each pooled version. A version enters the pool with the learning policy's rating at that moment (it
is that policy, then), so the learning policy's rating rises as it beats what it was. The model's `tau` keeps
the learning policy's uncertainty from shrinking to nothing, since it keeps changing. In a league, versions of
the other members met in games are rated here too, each from the model's first rating, at most MAX_FOREIGN.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable

import numpy as np

from tandem.daemons.runtime.reporter import TRAIN_PREFIX

RECENT_GAMES = 500  # the win rate reported is over the last this many games
MAX_FOREIGN = 1024  # versions of other policies (a league's) rated at once; the least recently met go first
MAX_OTHER_POLICIES = 64  # other policies a win rate is kept for (names come from peers: their number is bounded)


class PoolRatings:
    """`record(games)` from the intake thread, `counters()` from the training thread: one lock between them."""

    def __init__(self) -> None:
        from openskill.models import PlackettLuce

        self.model = PlackettLuce()
        self.learner = self.model.rating(name="learning")
        self.pool: dict[int, object] = {}
        self.foreign: OrderedDict[tuple[str, int], object] = OrderedDict()  # (policy, version) of a league's others
        self.recent: deque[float] = deque(maxlen=RECENT_GAMES)
        self.recent_vs: dict[str, deque[float]] = {}  # another policy -> the recent scores against its versions
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

    def record(self, games: Iterable[tuple]) -> None:
        """Each (opponent version, the learning side's score: 1 win, 0.5 draw, 0 loss), with the opponent's policy
        third when it is another (a league's); -1 is the live policy itself (played before the pool had any
        version) and moves no rating."""
        with self.lock:
            for game in games:
                version, score = game[0], game[1]
                self.games += 1
                self.recent.append(score)
                if len(game) > 2:
                    if game[2] in self.recent_vs or len(self.recent_vs) < MAX_OTHER_POLICIES:
                        self.recent_vs.setdefault(game[2], deque(maxlen=RECENT_GAMES)).append(score)
                    self.rate_foreign((game[2], version), score)
                    continue
                opponent = self.pool.get(version)
                if opponent is None:
                    continue
                self.pool[version] = self.rate(opponent, score)

    def rate(self, opponent: object, score: float) -> object:
        """One game of the learning policy against `opponent`: both ratings move; the opponent's new one."""
        ranks = [0, 1] if score == 1.0 else [1, 0] if score == 0.0 else [0, 0]
        [[learner], [opponent]] = self.model.rate([[self.learner], [opponent]], ranks=ranks)
        self.learner = learner
        return opponent

    def rate_foreign(self, key: tuple[str, int], score: float) -> None:
        opponent = self.foreign.pop(key, None) or self.model.rating(name=f"{key[0]}:{key[1]}")
        self.foreign[key] = self.rate(opponent, score)
        while len(self.foreign) > MAX_FOREIGN:
            self.foreign.popitem(last=False)

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
            for policy, scores in self.recent_vs.items():  # a league's: the score against each other member
                out[f"{TRAIN_PREFIX}win_rate_vs_{policy}"] = float(np.mean(scores))
            return out
