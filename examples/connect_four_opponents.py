"""Scripted Connect Four players to measure a self-play policy against (`selfplay.eval_opponent`) or to mix
into its training games (`selfplay.scripted_opponent`).

Each takes the observations an actor sees, [B, 6*7*2 + 7]: PettingZoo's board planes (this player's pieces,
then the opponent's) flattened, then the legal-move mask; and returns B columns.
"""

from __future__ import annotations

import numpy as np

ROWS, COLS = 6, 7
_rng = np.random.default_rng(12345)


def boards(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(board planes [B, 6, 7, 2], legal columns [B, 7])."""
    return obs[:, : ROWS * COLS * 2].reshape(-1, ROWS, COLS, 2) > 0, obs[:, -COLS:] > 0


def drop(pieces: np.ndarray, occupied: np.ndarray, col: int) -> np.ndarray:
    """`pieces` [6, 7] with one more in `col` (it falls to the lowest free row; row 0 is the top)."""
    row = np.flatnonzero(~occupied[:, col]).max()
    placed = pieces.copy()
    placed[row, col] = True
    return placed


def wins(pieces: np.ndarray) -> bool:
    """Four in a row: across, down or on either diagonal."""
    p = pieces
    return bool(
        (p[:, :-3] & p[:, 1:-2] & p[:, 2:-1] & p[:, 3:]).any()
        or (p[:-3] & p[1:-2] & p[2:-1] & p[3:]).any()
        or (p[:-3, :-3] & p[1:-2, 1:-2] & p[2:-1, 2:-1] & p[3:, 3:]).any()
        or (p[3:, :-3] & p[2:-1, 1:-2] & p[1:-2, 2:-1] & p[:-3, 3:]).any()
    )


def winning_moves(pieces: np.ndarray, occupied: np.ndarray, columns) -> list[int]:
    """The columns among `columns` where one more of `pieces` makes four."""
    return [c for c in columns if wins(drop(pieces, occupied, c))]


def one_step_lookahead(obs: np.ndarray) -> np.ndarray:
    """Win now if a move does; else block a column where the opponent would win next; else a random legal move."""
    planes, legal = boards(obs)
    out = np.zeros(len(obs), np.int64)
    for i in range(len(obs)):
        mine, theirs = planes[i, :, :, 0], planes[i, :, :, 1]
        occupied = mine | theirs
        columns = np.flatnonzero(legal[i])
        choice = winning_moves(mine, occupied, columns) or winning_moves(theirs, occupied, columns) or list(columns)
        out[i] = _rng.choice(choice) if choice else 0
    return out


def take_wins(obs: np.ndarray) -> np.ndarray:
    """Win now if a move does; else a random legal move. It never blocks, so it punishes only a threat left open:
    a training opponent that is not the look-ahead player the example is measured against."""
    planes, legal = boards(obs)
    out = np.zeros(len(obs), np.int64)
    for i in range(len(obs)):
        mine, theirs = planes[i, :, :, 0], planes[i, :, :, 1]
        columns = np.flatnonzero(legal[i])
        choice = winning_moves(mine, mine | theirs, columns) or list(columns)
        out[i] = _rng.choice(choice) if choice else 0
    return out


def opponent_can_win(mine: np.ndarray, theirs: np.ndarray, column: int) -> bool:
    """After this player drops a piece in `column`, can the opponent make four with its next piece?"""
    after = drop(mine, mine | theirs, column)
    occupied = after | theirs
    return bool(winning_moves(theirs, occupied, [c for c in range(COLS) if not occupied[0, c]]))


def careful(obs: np.ndarray) -> np.ndarray:
    """Win now if a move does; else block the opponent's win; else a random move after which the opponent cannot
    win at once, i.e. not below its threat (any move when all are). Stronger than the look-ahead player and not
    it: a training opponent that punishes an open threat and blocks the policy's single threats."""
    planes, legal = boards(obs)
    out = np.zeros(len(obs), np.int64)
    for i in range(len(obs)):
        mine, theirs = planes[i, :, :, 0], planes[i, :, :, 1]
        occupied = mine | theirs
        columns = list(np.flatnonzero(legal[i]))
        safe = [c for c in columns if not opponent_can_win(mine, theirs, c)]
        choice = winning_moves(mine, occupied, columns) or winning_moves(theirs, occupied, columns) or safe or columns
        out[i] = _rng.choice(choice) if choice else 0
    return out
