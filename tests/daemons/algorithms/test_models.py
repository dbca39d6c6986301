"""Q-network choice by observation space and model.kind, and the errors a bad kind gives."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tandem.daemons.algorithms.actor_critic import seeded_actor_critic
from tandem.daemons.algorithms.models import MLPQNetwork, NatureCNN, build_q_network
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.settings.schema import ModelSection

VECTOR = gym.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
IMAGE_CHW = gym.spaces.Box(0, 255, shape=(4, 84, 84), dtype=np.uint8)
IMAGE_HWC = gym.spaces.Box(0, 255, shape=(84, 84, 4), dtype=np.uint8)


# Factories reached through model.kind = "tests.daemons.algorithms.test_models:<name>".
def tiny_linear(obs_space, num_actions, model_cfg):
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(obs_space.shape)), num_actions))


def not_a_module(obs_space, num_actions, model_cfg):
    return "a string"


def wrong_width(obs_space, num_actions, model_cfg):
    return nn.Linear(int(np.prod(obs_space.shape)), num_actions + 1)


NOT_CALLABLE = 42


def build(space, kind="auto", num_actions=3, **kwargs):
    torch.manual_seed(0)
    return build_q_network(ModelSection(kind=kind, **kwargs), space, num_actions)


def test_vector_observations_get_an_mlp_with_the_configured_layers():
    net = build(VECTOR, hidden_sizes=[32, 16, 8], activation="tanh")
    assert isinstance(net, MLPQNetwork)
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 32), (32, 16), (16, 8), (8, 3)]
    assert sum(isinstance(m, nn.Tanh) for m in net.modules()) == 3
    out = net(torch.zeros(5, 4))
    assert out.shape == (5, 3)


def test_mlp_flattens_multi_dimensional_boxes_and_float64_input():
    space = gym.spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float64)
    net = build(space, kind="auto")
    assert isinstance(net, MLPQNetwork)
    assert net(torch.zeros(7, 2, 3, dtype=torch.float64)).shape == (7, 3)


@pytest.mark.parametrize("space", [IMAGE_CHW, IMAGE_HWC], ids=["chw", "hwc"])
def test_uint8_images_get_the_nature_cnn(space):
    net = build(space)
    assert isinstance(net, NatureCNN)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (32, (8, 8), (4, 4)),
        (64, (4, 4), (2, 2)),
        (64, (3, 3), (1, 1)),
    ]
    assert convs[0].in_channels == 4
    assert any(isinstance(m, nn.Linear) and m.out_features == 512 for m in net.modules())
    obs = torch.randint(0, 256, (2, *space.shape), dtype=torch.uint8)
    assert net(obs).shape == (2, 3)


def test_channel_last_and_channel_first_give_the_same_q_values_for_the_same_pixels():
    chw, hwc = build(IMAGE_CHW), build(IMAGE_HWC)  # same seed, same architecture: same weights
    pixels = np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    out_chw = chw(torch.from_numpy(pixels))
    out_hwc = hwc(torch.from_numpy(np.ascontiguousarray(pixels.transpose(0, 2, 3, 1))))
    torch.testing.assert_close(out_chw, out_hwc)


def test_uint8_pixels_are_scaled_by_1_over_255():
    net = build(IMAGE_CHW)
    float_space = gym.spaces.Box(0.0, 1.0, shape=(4, 84, 84), dtype=np.float32)
    unscaled = build(float_space, kind="nature_cnn")  # same weights, no scaling for float input
    pixels = np.random.default_rng(1).integers(0, 256, (2, 4, 84, 84), dtype=np.uint8)
    torch.testing.assert_close(net(torch.from_numpy(pixels)), unscaled(torch.from_numpy(pixels / 255.0).float()))


def test_explicit_kinds_override_auto():
    assert isinstance(build(IMAGE_CHW, kind="mlp", hidden_sizes=[8]), MLPQNetwork)
    with pytest.raises(ValueError, match="model.kind 'nature_cnn'.*3-D Box"):
        build(VECTOR, kind="nature_cnn")
    small = gym.spaces.Box(0, 255, shape=(3, 20, 20), dtype=np.uint8)
    with pytest.raises(ValueError, match="at least 36x36"):
        build(small)


def test_discrete_observations_are_one_hot_encoded():
    space = gym.spaces.Discrete(5, start=2)
    net = build(space, hidden_sizes=[8])
    assert isinstance(net, MLPQNetwork) and net.layers[0].in_features == 5
    out = net(torch.tensor([2, 6, 4]))
    assert out.shape == (3, 3)
    assert not torch.allclose(out[0], out[1])


def test_unsupported_observation_space_is_rejected_clearly():
    space = gym.spaces.Text(5)
    with pytest.raises(ValueError, match="model.kind .auto.*Box, MultiBinary, Discrete .one-hot. or Dict"):
        build(space)


def test_module_callable_is_imported_and_called():
    net = build(VECTOR, kind="tests.daemons.algorithms.test_models:tiny_linear")
    assert isinstance(net, nn.Sequential)
    assert net(torch.zeros(2, 4)).shape == (2, 3)


@pytest.mark.parametrize(
    "kind, message",
    [
        ("no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
        ("tests.daemons.algorithms.test_models:missing", "has no attribute 'missing'"),
        ("tests.daemons.algorithms.test_models:NOT_CALLABLE", "not a callable"),
        ("tests.daemons.algorithms.test_models:not_a_module", "returned a str, not a torch.nn.Module"),
        ("tests.daemons.algorithms.test_models:wrong_width", r"shape \(2, 3\), got shape \(2, 4\)"),
        ("tests.daemons.algorithms.test_models:", "expected 'module:callable'"),
        ("transformer", "is not one of auto, mlp, nature_cnn"),
    ],
)
def test_bad_kinds_raise_value_error_naming_model_kind(kind, message):
    with pytest.raises(ValueError, match="model.kind") as info:
        build(VECTOR, kind=kind)
    assert info.match(message)


def test_set_torch_threads_can_be_called_twice():
    before = torch.get_num_threads()
    try:
        set_torch_threads(1)
        set_torch_threads(2)  # inter-op count is fixed after the first call: no error
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError):
            set_torch_threads(0)
    finally:
        torch.set_num_threads(before)


def gram(layer: nn.Module) -> torch.Tensor:
    """W W^T over the weight's shorter side: gain^2 times the identity for an orthogonal init of that gain."""
    w = layer.weight.detach().reshape(layer.weight.shape[0], -1)
    return w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w


def test_orthogonal_init_keeps_the_nature_cnns_output_scale_and_spares_a_users_module():
    """With model.init = 'orthogonal' every layer's weight rows are orthonormal times sqrt(2) (the last x1) and
    biases are 0; the logits of random pixels then vary far more than under PyTorch's default init."""
    pixels = torch.randint(0, 256, (64, 84, 84, 4), dtype=torch.uint8)
    default, ortho = build(IMAGE_HWC), build(IMAGE_HWC, init="orthogonal")
    layers = [m for m in ortho.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for i, layer in enumerate(layers):
        gain = 1.0 if i == len(layers) - 1 else 2.0
        assert torch.allclose(gram(layer), gain * torch.eye(len(gram(layer))), atol=1e-4)
        assert not layer.bias.any()
    with torch.no_grad():
        assert ortho(pixels).std(0).mean() > 10 * default(pixels).std(0).mean()
    user = build(VECTOR, kind="tests.daemons.algorithms.test_models:tiny_linear", init="orthogonal")
    torch.manual_seed(0)
    assert torch.equal(user[1].weight, tiny_linear(VECTOR, 3, None)[1].weight)


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_orthogonal_unit_init_gives_every_layer_gain_1_and_leaves_the_first_policy_uneven(core):
    """'orthogonal_unit' (Sample Factory's init): every layer orthonormal at gain 1 and the policy's outputs not
    shrunk, so a fresh policy's entropy is below uniform's; 'orthogonal' starts near-uniform."""
    obs = torch.randn(256, 4, generator=torch.Generator().manual_seed(0)) * 3.0

    def entropy(init):
        config = config_from_dict(
            {
                "algorithm": {"name": "appo", "minibatch_by": "unrolls"},
                "model": {"hidden_sizes": [64, 64], "init": init, "core": core},
            }
        )
        torch.manual_seed(0)
        net = seeded_actor_critic(config, VECTOR, gym.spaces.Discrete(6), 0, None)
        with torch.no_grad():
            if core == "none":
                dist = net.distribution(obs)
            else:
                dist = net.head.distribution(net.policy_head(net.features(obs)), obs)
        return net, float(dist.entropy().mean())

    uniform = math.log(6)
    unit, unit_entropy = entropy("orthogonal_unit")
    _, scaled_entropy = entropy("orthogonal")
    assert scaled_entropy > uniform - 1e-3
    assert unit_entropy < uniform - 0.02
    layers = [m for m in unit.modules() if isinstance(m, nn.Linear)]
    for layer in layers:
        assert torch.allclose(gram(layer), torch.eye(len(gram(layer))), atol=1e-4)
