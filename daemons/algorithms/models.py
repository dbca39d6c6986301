"""Q-networks for a run's `[model]` section: an MLP, the Nature CNN, or a user's `module:callable`."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.distributions import POLICY_OUTPUT_GAIN
from tandem.daemons.algorithms.multi_input import MultiInputNetwork
from tandem.daemons.algorithms.net_parts import (
    ACTIVATIONS,
    BUILTIN_KINDS,
    NATURE_CNN_MIN_SIZE,
    image_channels_last,
    is_image_space,
    mlp,
)
from tandem.daemons.envs.dict_obs import is_dict_space, key_spaces
from tandem.daemons.settings.plugins import import_callable
from tandem.daemons.settings.schema import ModelSection
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol import keyed


class MLPQNetwork(nn.Module):
    """Flattens each observation (or one-hot encodes a Discrete one) and maps it to one Q-value per action."""

    def __init__(
        self,
        in_features: int,
        num_actions: int,
        hidden_sizes: Sequence[int],
        activation: str,
        one_hot: int | None = None,
        one_hot_start: int = 0,
    ) -> None:
        super().__init__()
        self.one_hot = one_hot
        self.one_hot_start = one_hot_start
        self.layers = mlp(in_features, num_actions, hidden_sizes, activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.one_hot is not None:
            x = nn.functional.one_hot(obs.reshape(obs.shape[0]).long() - self.one_hot_start, self.one_hot).float()
        else:
            x = obs.reshape(obs.shape[0], -1).float()
        return self.layers(x)


class NatureCNN(nn.Module):
    """Mnih et al. (2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 512; uint8 pixels are scaled by 1/255."""

    def __init__(self, obs_shape: Sequence[int], num_actions: int, channels_last: bool, scale: bool) -> None:
        super().__init__()
        self.channels_last = channels_last
        self.scale = scale
        c, h, w = (obs_shape[2], obs_shape[0], obs_shape[1]) if channels_last else tuple(obs_shape)
        self.convs = nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, c, h, w)).shape[1]
        self.head = nn.Sequential(nn.Linear(flat, 512), nn.ReLU(), nn.Linear(512, num_actions))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()
        if self.scale:
            x = x * (1.0 / 255.0)
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        # oneDNN's convolutions run 1.3-1.5x faster on a CPU with the channels innermost (NHWC) for a training
        # batch, and no slower for an actor's few envs; only the input is laid out so: the weights, and with
        # them checkpoints and the wire, keep their usual layout
        x = x.contiguous(memory_format=torch.channels_last)
        return self.head(self.convs(x))


# model.init's orthogonal choices: the gain of every layer but the last (which gets 1)
HIDDEN_GAINS = {"orthogonal": float(np.sqrt(2.0)), "orthogonal_unit": 1.0}


def policy_output_gain(model_cfg: ModelSection) -> float:
    """What a built-in network's policy outputs are scaled by after init: near-uniform first policies, except
    with 'orthogonal_unit', which leaves them as initialised (Sample Factory's first policies are not uniform)."""
    return 1.0 if model_cfg.init == "orthogonal_unit" else POLICY_OUTPUT_GAIN


def init_orthogonal(net: nn.Module, hidden_gain: float, output_gain: float = 1.0) -> None:
    """Orthogonal weights and zero biases for every Linear and Conv2d layer; the last layer gets `output_gain`.

    Why: PyTorch's default scales each ReLU layer's output down by roughly 2.4x, so after the Nature CNN's
    five layers a policy's logits barely depend on the pixels at the start; gain sqrt(2) keeps the scale.
    """
    layers = [m for m in net.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for i, layer in enumerate(layers):
        nn.init.orthogonal_(layer.weight, gain=output_gain if i == len(layers) - 1 else hidden_gain)
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)


def build_mlp(model_cfg: ModelSection, obs_space: gym.Space, num_actions: int) -> nn.Module:
    if is_dict_space(obs_space):  # one encoder per key, then this MLP
        return MultiInputNetwork(obs_space, num_actions, model_cfg.hidden_sizes, model_cfg.activation)
    if isinstance(obs_space, gym.spaces.Discrete):
        n = int(obs_space.n)
        return MLPQNetwork(
            n, num_actions, model_cfg.hidden_sizes, model_cfg.activation, one_hot=n, one_hot_start=int(obs_space.start)
        )
    if isinstance(obs_space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        in_features = int(np.prod(obs_space.shape, dtype=np.int64))
        return MLPQNetwork(in_features, num_actions, model_cfg.hidden_sizes, model_cfg.activation)
    raise SetupError(
        f"model.kind {model_cfg.kind!r}: the MLP takes Box, MultiBinary, Discrete (one-hot) or Dict "
        f"observations (or a Tuple of them), not {obs_space}"
    )


def build_nature_cnn(model_cfg: ModelSection, obs_space: gym.Space, num_actions: int) -> nn.Module:
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 3:
        raise SetupError(
            f"model.kind {model_cfg.kind!r}: the Nature CNN needs a 3-D Box observation "
            f"([C, H, W] or [H, W, C]), got {obs_space}"
        )
    shape = obs_space.shape
    channels_last = image_channels_last(shape)
    h, w = (shape[0], shape[1]) if channels_last else (shape[1], shape[2])
    if min(h, w) < NATURE_CNN_MIN_SIZE:
        raise SetupError(
            f"model.kind {model_cfg.kind!r}: the Nature CNN needs images of at least "
            f"{NATURE_CNN_MIN_SIZE}x{NATURE_CNN_MIN_SIZE}, got observation shape {shape}"
        )
    return NatureCNN(shape, num_actions, channels_last, scale=obs_space.dtype == np.uint8)


def build_from_callable(model_cfg: ModelSection, obs_space: gym.Space, num_actions: int) -> nn.Module:
    kind = model_cfg.kind
    target = import_callable(kind, "model.kind")
    net = target(obs_space, num_actions, model_cfg)
    if not isinstance(net, nn.Module):
        raise SetupError(f"model.kind {kind!r}: the callable returned a {type(net).__name__}, not a torch.nn.Module")
    return net


def dummy_obs(obs_space: gym.Space, batch: int) -> np.ndarray | None:
    """A batch of in-range observations for a shape check, or None for spaces we cannot batch."""
    if is_dict_space(obs_space):
        keys = {key: dummy_obs(sub, batch) for key, sub in key_spaces(obs_space).items()}
        return None if any(v is None for v in keys.values()) else keys
    if isinstance(obs_space, gym.spaces.Discrete):
        return np.full(batch, obs_space.start, dtype=np.int64)
    if isinstance(obs_space, gym.spaces.Box):
        return np.broadcast_to(np.clip(0, obs_space.low, obs_space.high), (batch, *obs_space.shape)).astype(
            obs_space.dtype
        )
    if isinstance(obs_space, gym.spaces.MultiBinary):
        return np.zeros((batch, *obs_space.shape), dtype=obs_space.dtype)
    return None


def check_output(model_cfg: ModelSection, net: nn.Module, obs_space: gym.Space, num_actions: int) -> None:
    """One forward pass on two observations (when the space has array form) must give [2, num_actions] floats."""
    obs = dummy_obs(obs_space, 2)
    if obs is None:
        return
    with torch.no_grad():
        try:
            out = net(keyed.map_obs(torch.as_tensor, obs))
        except Exception as exc:
            raise SetupError(
                f"model.kind {model_cfg.kind!r}: forward pass on observations "
                f"{keyed.describe(obs)} failed ({type(exc).__name__}: {exc})"
            ) from exc
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_actions) or not out.is_floating_point():
        got = f"shape {tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise SetupError(
            f"model.kind {model_cfg.kind!r}: a batch of 2 observations must give float outputs of "
            f"shape (2, {num_actions}), got {got}"
        )


def build_q_network(model_cfg: ModelSection, obs_space: gym.Space, num_actions: int) -> nn.Module:
    """The Q-network [B, *obs_shape] -> [B, num_actions] that `model_cfg.kind` names, checked by one forward pass.

    `auto` picks the Nature CNN for 3-D uint8 Box observations and the MLP for everything else; Discrete
    observations are one-hot encoded by the MLP. Raises ValueError naming model.kind when anything is wrong.
    """
    if num_actions < 1:
        raise ValueError(f"model.kind {model_cfg.kind!r}: need at least one action, got {num_actions}")
    if model_cfg.activation not in ACTIVATIONS:
        raise ValueError(f"model.activation {model_cfg.activation!r} is not one of {', '.join(ACTIVATIONS)}")
    kind = model_cfg.kind
    if kind == "auto":
        net = (build_nature_cnn if is_image_space(obs_space) else build_mlp)(model_cfg, obs_space, num_actions)
    elif kind == "mlp":
        net = build_mlp(model_cfg, obs_space, num_actions)
    elif kind == "nature_cnn":
        net = build_nature_cnn(model_cfg, obs_space, num_actions)
    elif ":" in kind:
        net = build_from_callable(model_cfg, obs_space, num_actions)
    else:
        raise SetupError(f"model.kind {kind!r} is not one of {', '.join(BUILTIN_KINDS)} or 'module:callable'")
    if model_cfg.init in HIDDEN_GAINS and kind in BUILTIN_KINDS:  # a user's module keeps its own initialisation
        init_orthogonal(net, hidden_gain=HIDDEN_GAINS[model_cfg.init])
    check_output(model_cfg, net, obs_space, num_actions)
    return net
