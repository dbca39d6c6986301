"""Pieces every built-in network shares: activations, the MLP, and what counts as an image and how it is laid out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
from torch import nn

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}
BUILTIN_KINDS = ("auto", "mlp", "nature_cnn")
NATURE_CNN_MIN_SIZE = 36  # the smallest height/width the three Nature convolutions accept


def mlp(in_features: int, out_features: int, hidden_sizes: Sequence[int], activation: str) -> nn.Sequential:
    """Linear layers of `hidden_sizes` with `activation` after each, then a linear output of `out_features`."""
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden_sizes:
        layers += [nn.Linear(width, int(size)), ACTIVATIONS[activation]()]
        width = int(size)
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


def is_image_space(space: gym.Space) -> bool:
    """A 3-D uint8 Box: what `auto` hands to the Nature CNN."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and space.dtype == np.uint8


def image_channels_last(shape: Sequence[int]) -> bool:
    """[H, W, C] when the last axis is smaller than the first (84x84x4, 210x160x3); [C, H, W] otherwise."""
    return shape[-1] < shape[0]
