"""A small convolutional network for Connect Four's board (`model.kind = "connect_four_net:make_net"`).

The observation an actor adapts from PettingZoo's {observation, action_mask} is the 6x7x2 board (this player's
pieces, then the opponent's) flattened, then the 7-entry mask; convolutions see a threat the same wherever on
the board it is, which a plain MLP over the flattened board must learn cell by cell.
"""

from __future__ import annotations

import torch
from torch import nn

ROWS, COLS = 6, 7


def playable(mine: torch.Tensor, theirs: torch.Tensor) -> torch.Tensor:
    """[B, 6, 7]: 1 where a piece dropped in that column would land (empty, with a piece or the floor below).

    Row 0 is the top. Given as an input because a threat matters only once its cell can be played, and the
    network would otherwise have to work out each column's height from the pieces.
    """
    occupied = mine + theirs
    floor = torch.ones_like(occupied[:, :1])
    below = torch.cat([occupied[:, 1:], floor], dim=1)
    return (1 - occupied) * below


class BoardNet(nn.Module):
    """`depth` 3x3 convolutions, then one hidden layer; with `landing`, a third input plane from `playable`."""

    def __init__(self, num_outputs: int, channels: int, hidden: int, depth: int, landing: bool):
        super().__init__()
        self.landing = landing
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Conv2d(channels if i else 2 + landing, channels, 3, padding=1), nn.ReLU()]
        self.convs = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Sequential(nn.Linear(channels * ROWS * COLS, hidden), nn.ReLU(), nn.Linear(hidden, num_outputs))

    def planes(self, x: torch.Tensor) -> torch.Tensor:
        """[B, 2 or 3, 6, 7]: this player's pieces, the opponent's, and with `landing` the playable cells."""
        board = x[:, : ROWS * COLS * 2].reshape(-1, ROWS, COLS, 2).float()
        mine, theirs = board[..., 0], board[..., 1]
        planes = [mine, theirs, playable(mine, theirs)] if self.landing else [mine, theirs]
        return torch.stack(planes, dim=1)

    def forward(self, x):
        return self.head(self.convs(self.planes(x)))


class MirrorBoardNet(BoardNet):
    """BoardNet that answers the same for a board and its mirror image: it sees both and averages, column c's
    logit with column 6-c's from the mirrored board, the value (any output past the seven columns) with itself.

    Connect Four is left-right symmetric, so every game teaches the network its mirror image as well; a plain
    network must learn each position and its mirror separately. Costs one more pass over the board per call.
    """

    def __init__(self, num_outputs: int, channels: int, hidden: int, depth: int, landing: bool):
        super().__init__(num_outputs, channels, hidden, depth, landing)
        self.columns = COLS if num_outputs >= COLS else 0  # a value-only network has no column outputs

    def forward(self, x):
        planes = self.planes(x)
        out = self.head(self.convs(torch.cat([planes, planes.flip(-1)])))
        seen, mirrored = out[: len(planes)], out[len(planes) :]
        mirrored = torch.cat([mirrored[:, : self.columns].flip(-1), mirrored[:, self.columns :]], dim=1)
        return (seen + mirrored) / 2


def hidden_size(model) -> int:
    return int(model.hidden_sizes[-1]) if model.hidden_sizes else 256


def make_net(obs_space, num_outputs: int, model) -> nn.Module:
    """The example's network: two convolutions over the two piece planes."""
    return BoardNet(num_outputs, channels=32, hidden=hidden_size(model), depth=2, landing=False)


def make_mirror_net(obs_space, num_outputs: int, model) -> nn.Module:
    """The example's network, made to answer a board and its mirror image alike (MirrorBoardNet): tried on
    2026-11-28 and stopped at 13 minutes, slower and no better by then (docs/learning.md#self-play-connect-four)."""
    return MirrorBoardNet(num_outputs, channels=32, hidden=hidden_size(model), depth=2, landing=False)


def make_deep_net(obs_space, num_outputs: int, model) -> nn.Module:
    """Three convolutions (each cell sees a whole line of four through it) and the landing-cell plane: tried on
    2026-11-27 with one shared torso, not better at 30 minutes (docs/learning.md#self-play-connect-four)."""
    return BoardNet(num_outputs, channels=32, hidden=hidden_size(model), depth=3, landing=True)
