"""The numpy acting pass gives the torch policy's actions and log-probabilities, for every head it takes on."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from tandem.daemons.algorithms.actor_critic import seeded_actor_critic
from tandem.daemons.algorithms.appo.policy import BEHAVIOUR_LOGP, StochasticPolicy
from tandem.daemons.algorithms.dqn.learner import DQNPolicy
from tandem.daemons.algorithms.numpy_acting import MAX_ROWS, NumpyActing
from tandem.daemons.config.loader import load_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cartpole_appo.toml"
BOX4 = gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
BOX2 = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
MASKED_OBS = gym.spaces.Box(0.0, 1.0, (6,), np.float32)
CASES = {
    "discrete": (BOX4, gym.spaces.Discrete(3, start=-1), [], 0),
    "shared-torso, tanh": (BOX4, gym.spaces.Discrete(2), ["algorithm.shared_torso=true", "model.activation='tanh'"], 0),
    "multi-discrete, elu": (BOX4, gym.spaces.MultiDiscrete([3, 2, 4]), ["model.activation='elu'"], 0),
    "box": (BOX4, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), ["algorithm.log_std_init=-0.5"], 0),
    "box, state-dependent std": (
        BOX4,
        gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        ["algorithm.state_dependent_std=true"],
        0,
    ),
    "discrete observations": (gym.spaces.Discrete(7, start=2), gym.spaces.Discrete(3), [], 0),
    "action mask": (
        gym.spaces.Box(0.0, 1.0, (6,), np.float32),
        gym.spaces.Discrete(3),
        ["algorithm.normalize_obs=false"],
        3,
    ),
}


def net_for(case: str):
    obs_space, action_space, overrides, mask = CASES[case]
    config = load_config(EXAMPLE, ["algorithm.normalize_obs=true", *overrides])
    net = seeded_actor_critic(config, obs_space, action_space, mask, seed=5).eval()
    if net.obs_norm is not None:  # statistics that matter: the pass must scale and shift like the torch one
        net.obs_norm.mean.copy_(torch.tensor([0.3, -0.2, 0.1, 0.5]))
        net.obs_norm.var.copy_(torch.tensor([0.5, 2.0, 0.01, 1.5]))
    return net, obs_space


def observations(obs_space: gym.Space, rows: int) -> np.ndarray:
    obs_space.seed(11)
    return np.stack([np.asarray(obs_space.sample(), dtype=obs_space.dtype) for _ in range(rows)])


@pytest.mark.parametrize("case", list(CASES))
def test_the_numpy_pass_gives_the_torch_policys_log_probs_and_greedy_actions(case):
    net, obs_space = net_for(case)
    fast = NumpyActing.of(net)
    assert fast is not None
    obs = observations(obs_space, 16)
    actions, logp = fast.explore(obs, np.random.default_rng(0))
    with torch.no_grad():
        x = torch.as_tensor(obs)
        dist = net.distribution(x)
        torch_logp = dist.log_prob(net.head.from_wire(torch.as_tensor(actions))).numpy()
        torch_greedy = net.head.to_wire(net.greedy(x)).numpy()
    assert logp.dtype == np.float32 and logp.shape == (16,)
    np.testing.assert_allclose(logp, torch_logp, rtol=1e-5, atol=1e-5)
    if fast.kind == "box":  # means: float32 sums in another order
        np.testing.assert_allclose(fast.greedy(obs), torch_greedy, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(fast.greedy(obs), torch_greedy)
    assert actions.dtype == torch_greedy.dtype and actions.shape == torch_greedy.shape
    assert obs_space.contains(obs[0])


def test_sampled_actions_follow_the_policys_probabilities():
    net, obs_space = net_for("discrete")
    with torch.no_grad():
        net.policy.layers[-1].bias.copy_(torch.tensor([1.0, 0.0, -1.0]))
    fast = NumpyActing.of(net)
    obs = np.repeat(observations(obs_space, 1), 20_000, axis=0)
    actions = np.concatenate(
        [fast.explore(chunk, np.random.default_rng(i))[0] for i, chunk in enumerate(np.split(obs, 400))]
    )
    with torch.no_grad():
        probs = net.distribution(torch.as_tensor(obs[:1])).parts[0].exp().numpy()[0]
    counts = np.bincount(actions - (-1), minlength=3) / len(actions)
    # 20,000 draws: one standard error is at most 0.0036, so 0.02 is over 5 of them
    np.testing.assert_allclose(counts, probs, atol=0.02)
    masked, _ = net_for("action mask")
    mask_obs = observations(MASKED_OBS, 200)
    mask_obs[:, -3:] = [1.0, 0.0, 1.0]  # action 1 is illegal in every row
    picks, logp = NumpyActing.of(masked).explore(mask_obs, np.random.default_rng(1))
    assert set(picks.tolist()) == {0, 2} and np.isfinite(logp).all()


def test_networks_it_cannot_reproduce_stay_on_torch():
    config = load_config(EXAMPLE, [])
    pixels = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert NumpyActing.of(seeded_actor_critic(config, pixels, gym.spaces.Discrete(6), 0, seed=1)) is None
    net = seeded_actor_critic(config, BOX4, gym.spaces.Discrete(2), 0, seed=1)
    net.policy.layers.append(torch.nn.Softmax(dim=-1))  # not the Linear/activation form the MLP is built in
    assert NumpyActing.of(net) is None


def test_the_policy_acts_in_numpy_for_small_batches_and_keeps_a_copy_of_the_weights():
    config = load_config(EXAMPLE, [])
    policy = StochasticPolicy(config, BOX4, gym.spaces.Discrete(2), seed=3)
    weights = {k: v.numpy().copy() for k, v in policy.nets.current.state_dict().items()}
    policy.load_weights(weights)
    before = policy.twin.of(policy.nets.current)
    obs = observations(BOX4, MAX_ROWS)
    greedy = policy.act(obs, np.zeros(MAX_ROWS))
    changed = {k: (-v if k.startswith("policy.") and v.dtype == np.float32 else v) for k, v in weights.items()}
    policy.load_weights(changed)  # written into the other network: the earlier snapshot must not change
    assert policy.twin.of(policy.nets.current) is not before
    np.testing.assert_array_equal(before.greedy(obs), greedy)
    actions, extras = policy.explore(obs, np.zeros(MAX_ROWS))
    assert actions.shape == (MAX_ROWS,) and extras[BEHAVIOUR_LOGP].shape == (MAX_ROWS,)
    big = observations(BOX4, MAX_ROWS + 1)  # above the limit: the torch path, the same greedy actions
    np.testing.assert_array_equal(
        policy.act(big, np.zeros(len(big)))[:MAX_ROWS], policy.twin.of(policy.nets.current).greedy(big[:MAX_ROWS])
    )


@pytest.mark.parametrize("obs_space", [BOX4, gym.spaces.Discrete(5, start=1)], ids=["box", "discrete"])
def test_a_dqn_policy_acts_greedily_in_numpy_as_it_does_in_torch(obs_space):
    config = load_config(EXAMPLE.with_name("cartpole.toml"), ["model.activation='elu'"])
    policy = DQNPolicy(config, obs_space, gym.spaces.Discrete(4, start=2), seed=2)
    obs = observations(obs_space, 32)
    with torch.no_grad():
        q = policy.nets.current(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(policy.twin.of(policy.nets.current)(obs), q, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(policy.act(obs, np.zeros(32)), q.argmax(axis=1) + 2)
    masked = DQNPolicy(config, MASKED_OBS, gym.spaces.Discrete(3), seed=2, mask_size=3)
    mask_obs = observations(MASKED_OBS, 32)
    mask_obs[:, -3:] = [0.0, 1.0, 0.0]  # only action 1 is legal
    assert (masked.act(mask_obs, np.zeros(32)) == 1).all()


def test_the_twin_follows_every_weights_load_and_in_place_change():
    """Two loads between calls bring back the network object of two loads ago (its numpy writes invisible to
    torch's version counters), and a test or notebook may change a parameter in place: neither acts stale."""
    config = load_config(EXAMPLE, [])
    policy = StochasticPolicy(config, BOX4, gym.spaces.Discrete(2), seed=3)
    obs = observations(BOX4, 32)
    base = {k: v.numpy().copy() for k, v in policy.nets.current.state_dict().items()}
    flipped = {k: (-v if k.startswith("policy.") and v.dtype == np.float32 else v) for k, v in base.items()}
    for weights in (base, flipped, base, flipped):
        policy.load_weights(weights)
        policy.act(obs, np.zeros(32))
    policy.load_weights(base)
    policy.load_weights(flipped)  # the same network object as two loads ago, with other weights
    with torch.no_grad():
        torch_greedy = policy.nets.current.head.to_wire(policy.nets.current.greedy(torch.as_tensor(obs))).numpy()
    np.testing.assert_array_equal(policy.act(obs, np.zeros(32)), torch_greedy)
    with torch.no_grad():
        policy.nets.current.policy.layers[-1].bias.copy_(torch.tensor([5.0, -5.0]))  # action 0 everywhere
    assert (policy.act(obs, np.zeros(32)) == 0).all()
