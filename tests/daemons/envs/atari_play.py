"""Random play in a group of Atari envs until it reports a whole game (not a life) over."""

from __future__ import annotations

import numpy as np


def play_until_a_game_is_reported(group, seed: int = 0) -> tuple[int, list]:
    """Step `group` (of 2 envs, 4 actions) under a fixed random action sequence until it reports a finished game,
    then close it: the episode ends the learner saw on the way, and the games reported."""
    rng = np.random.default_rng(seed)
    ends, reported = 0, []
    try:
        while not reported:
            result = group.step(rng.integers(4, size=2))
            ends += int(np.count_nonzero(result.terminated | result.truncated))
            reported += result.episodes
    finally:
        group.close()
    return ends, reported
