"""Fixed (scripted) players of a game's seat: what self-play is measured against and may mix into its games.

"random" plays a uniformly random legal action (the action mask is the last `mask_size` entries of each
observation, as an actor adapts a PettingZoo {observation, action_mask} dict); "module:callable" is called with
the observations [B, D] and returns B actions: a scripted player of the game.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tandem.daemons.settings.plugins import import_callable

Opponent = Callable[[np.ndarray], np.ndarray]


def random_legal(mask_size: int, seed: int, actions: int) -> Opponent:
    """Uniform over the legal actions (over all `actions` where the observation has no mask)."""
    rng = np.random.default_rng(seed)

    def play(obs: np.ndarray) -> np.ndarray:
        legal = obs[:, -mask_size:] > 0 if mask_size else np.ones((len(obs), actions), bool)
        return np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in legal])

    return play


def fixed_player(spec: str, mask_size: int, actions: int, seed: int, key: str = "selfplay.eval_opponent") -> Opponent:
    """The player `spec` names; SetupError naming `key` (the config key that holds it) when it cannot be imported."""
    if spec == "random":
        return random_legal(mask_size, seed, actions)
    return import_callable(spec, key)
