"""A small convolutional network for Connect Four's board (`model.kind = "connect_four_net:make_net"`).

The observation an actor adapts from PettingZoo's {observation, action_mask} is the 6x7x2 board (this player's
pieces, then the opponent's) flattened, then the 7-entry mask; convolutions see a threat the same wherever on
the board it is, which a plain MLP over the flattened board must learn cell by cell.
"""

from __future__ import annotations

from torch import nn

ROWS, COLS = 6, 7


class BoardNet(nn.Module):
    def __init__(self, num_outputs: int, channels: int, hidden: int):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(2, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Linear(channels * ROWS * COLS, hidden), nn.ReLU(), nn.Linear(hidden, num_outputs))

    def forward(self, x):
        board = x[:, : ROWS * COLS * 2].reshape(-1, ROWS, COLS, 2).permute(0, 3, 1, 2).float()
        return self.head(self.convs(board))


def make_net(obs_space, num_outputs: int, model) -> nn.Module:
    hidden = int(model.hidden_sizes[-1]) if model.hidden_sizes else 256
    return BoardNet(num_outputs, channels=32, hidden=hidden)
