"""The built-in network for Dict observations: one encoder per key, joined, then the MLP of `[model]`.

A key that is an image (a 3-D uint8 Box, or a 4-D stack of them, its frames' channels side by side) goes
through convolutions: the Nature CNN's, on pixels scaled to [0, 1], when it is at least 36 pixels a side; for
a smaller grid (MiniGrid's 7x7 cells of object, colour and state codes) three 2x2 convolutions on the values as
they are, as the MiniGrid baselines do. A vector Box or a
MultiBinary key is flattened, a Discrete key one-hot encoded. The features of every key are concatenated and
go through `model.hidden_sizes` to the outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.net_parts import ACTIVATIONS, NATURE_CNN_MIN_SIZE, image_channels_last, is_image_space
from tandem.daemons.envs.dict_obs import key_spaces


class ImageEncoder(nn.Module):
    """Convolutions over one image key [B, H, W, C] or [B, C, H, W], flattened; a stack of S images
    [B, S, H, W, C] or [B, S, C, H, W] is taken as one image of S*C channels."""

    def __init__(self, shape: Sequence[int]):
        super().__init__()
        self.stacked = len(shape) == 4
        image = tuple(shape[1:]) if self.stacked else tuple(shape)
        self.channels_last = image_channels_last(image)
        c, h, w = (image[2], image[0], image[1]) if self.channels_last else image
        c *= shape[0] if self.stacked else 1
        self.scale = min(h, w) >= NATURE_CNN_MIN_SIZE  # camera pixels; a small grid's codes are used as they are
        if self.scale:
            convs = [nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU()]
            convs += [nn.Conv2d(64, 64, 3, stride=1), nn.ReLU()]
        else:
            convs = [nn.Conv2d(c, 16, 2), nn.ReLU()]
            if min(h, w) >= 6:  # room to pool once (7x7 -> 6x6 -> 3x3)
                convs.append(nn.MaxPool2d(2))
            convs += [nn.Conv2d(16, 32, 2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 2), nn.ReLU()]
        self.convs = nn.Sequential(*convs, nn.Flatten())
        with torch.no_grad():
            self.width = int(self.convs(torch.zeros(1, c, h, w)).shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.scale:
            x = x * (1.0 / 255.0)
        if self.stacked and self.channels_last:
            x = x.permute(0, 1, 4, 2, 3)  # [B, S, C, H, W]
        if self.stacked:
            x = x.flatten(1, 2)  # the S frames' channels side by side, oldest first
        elif self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.convs(x)


def is_image_stack(space: gym.Space) -> bool:
    """A 4-D uint8 Box: a stack of images (tandem.daemons.envs.key_stack.KeyFrameStack of an image key)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 4 and space.dtype == np.uint8


class OneHot(nn.Module):
    def __init__(self, n: int, start: int):
        super().__init__()
        self.n, self.start, self.width = n, start, n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = (x.reshape(x.shape[0]).long() - self.start).clamp(0, self.n - 1)
        return nn.functional.one_hot(index, self.n).float()


class Flat(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.width = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1).float()


def key_encoder(key: str, space: gym.Space) -> nn.Module:
    if is_image_space(space) or is_image_stack(space):
        return ImageEncoder(space.shape)
    if isinstance(space, gym.spaces.Discrete):
        return OneHot(int(space.n), int(space.start))
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        size = 1
        for d in space.shape:
            size *= int(d)
        return Flat(size)
    raise ValueError(f"observation key {key!r}: no encoder for {space}")


class MultiInputNetwork(nn.Module):
    """{key: [B, ...]} -> [B, num_outputs]: an encoder per key, concatenated, then the MLP."""

    def __init__(self, space: gym.spaces.Dict, num_outputs: int, hidden_sizes: Sequence[int], activation: str):
        super().__init__()
        # sorted: the features join in one order whatever order a Dict space lists its keys in
        keys = key_spaces(space)
        self.encoders = nn.ModuleDict({key: key_encoder(key, keys[key]) for key in sorted(keys)})
        layers: list[nn.Module] = []
        width = sum(encoder.width for encoder in self.encoders.values())
        for size in hidden_sizes:
            layers += [nn.Linear(width, int(size)), ACTIVATIONS[activation]()]
            width = int(size)
        self.head = nn.Sequential(*layers, nn.Linear(width, num_outputs))

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(torch.cat([encoder(obs[key]) for key, encoder in self.encoders.items()], dim=1))
