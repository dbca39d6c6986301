"""learner.augment: each unroll an on-policy update takes, and a copy the user's function makes of it (a mirror image).

A board game that is symmetric teaches the same lesson in a position and its mirror image; a network learns both
only from games that reach both. The copy is made after the intake has counted and checked the unroll, so it adds
no env steps, no games to the ratings and no frames to any counter: only training data.

The copy is an off-policy unroll like any other: its behaviour log-probabilities are the original's, which are the
log-probabilities of the mirrored actions under the mirrored behaviour policy when the game is symmetric, and
V-trace's importance ratios correct for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tandem.daemons.settings.plugins import import_callable
from tandem.protocol import TransitionBatch, keyed

KEY = "learner.augment"


class UnrollAugment:
    """Calls the configured function on every unroll of an update and checks that each copy fits beside it."""

    def __init__(self, spec: str):
        self.spec = spec
        self.copy: Callable[[TransitionBatch], TransitionBatch] = import_callable(spec, KEY)

    def __call__(self, unrolls: Sequence[TransitionBatch]) -> list[TransitionBatch]:
        """The unrolls, then one copy of each."""
        if not isinstance(unrolls, (list, tuple)) or not all(isinstance(u, TransitionBatch) for u in unrolls):
            # a plug-in algorithm's feed may hand its update something else than the unrolls that came
            raise ValueError(f"{KEY}: the algorithm's feed gives its update a {type(unrolls).__name__}, not unrolls")
        return [*unrolls, *(self.checked(u, self.copy(u)) for u in unrolls)]

    def checked(self, original: TransitionBatch, copy: object) -> TransitionBatch:
        """`copy`, or ValueError naming the function and what about its result differs from the original's."""
        where = f"{KEY} {self.spec!r}"
        if not isinstance(copy, TransitionBatch):
            raise ValueError(f"{where} returned a {type(copy).__name__}, not a TransitionBatch")
        columns = {"obs": (original.obs, copy.obs), "final_obs": (original.final_obs, copy.final_obs)}
        columns |= {"actions": (original.actions, copy.actions), "rewards": (original.rewards, copy.rewards)}
        columns |= {f"extra.{k}": (v, copy.extras.get(k)) for k, v in original.extras.items()}
        for name, (mine, theirs) in columns.items():
            for key, (a, b) in paired(mine, theirs).items():
                if b is None or a.shape != b.shape or a.dtype != b.dtype:
                    got = "nothing" if b is None else f"{b.dtype} {list(b.shape)}"
                    raise ValueError(f"{where}: its {name}{key} is {got}, the unroll's {a.dtype} {list(a.shape)}")
        if not (
            np.array_equal(original.terminated, copy.terminated) and np.array_equal(original.truncated, copy.truncated)
        ):
            raise ValueError(
                f"{where}: its copy ends episodes elsewhere than the unroll (terminated or truncated differ)"
            )
        return copy


def paired(mine: np.ndarray | dict, theirs: np.ndarray | dict | None) -> dict[str, tuple]:
    """'' -> (mine, theirs) for plain arrays; '.KEY' -> each key's pair for a Dict observation's."""
    if not keyed.is_keyed(mine):
        return {"": (mine, theirs if isinstance(theirs, np.ndarray) else None)}
    other = theirs if isinstance(theirs, dict) else {}
    return {f".{k}": (v, other.get(k)) for k, v in mine.items()}
