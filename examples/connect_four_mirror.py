"""The mirror image of a Connect Four unroll (`learner.augment = "connect_four_mirror:mirror_unroll"`).

Connect Four is left-right symmetric: a game mirrored is a game with the same moves in columns 6 - c and the same
result. The observation is the 6x7x2 board flattened, then the 7-entry action mask (as connect_four_net reads it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tandem.protocol import TransitionBatch

ROWS, COLS, PLANES = 6, 7, 2
BOARD = ROWS * COLS * PLANES


def mirror_obs(obs: np.ndarray) -> np.ndarray:
    """[..., 91] observations with the board's columns and the mask's entries in reverse order."""
    if obs.shape[-1] != BOARD + COLS:
        raise ValueError(
            f"a Connect Four observation has {BOARD + COLS} entries (board, then mask), got {obs.shape[-1]}"
        )
    lead = obs.shape[:-1]
    board = obs[..., :BOARD].reshape(*lead, ROWS, COLS, PLANES)[..., ::-1, :]
    mask = obs[..., BOARD:][..., ::-1]
    return np.concatenate([board.reshape(*lead, BOARD), mask], axis=-1)


def mirror_unroll(unroll: TransitionBatch) -> TransitionBatch:
    """The unroll played in mirror image: boards, masks and actions mirrored; rewards, ends and the behaviour
    log-probabilities (those of the mirrored moves under the mirrored policy) as they were."""
    return dataclasses.replace(
        unroll,
        obs=mirror_obs(unroll.obs),
        final_obs=mirror_obs(unroll.final_obs),
        actions=(COLS - 1 - unroll.actions).astype(unroll.actions.dtype),
        games=(),
    )
