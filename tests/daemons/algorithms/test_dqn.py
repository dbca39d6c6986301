"""Double DQN learns known Q-values, uses the double target, and its policy swaps weights all or nothing."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tandem.daemons.algorithms import make_algorithm, make_policy
from tandem.daemons.algorithms.dqn.learner import DoubleDQN, DQNPolicy
from tandem.daemons.algorithms.dqn.spec import DQNSection
from tandem.daemons.replay import SampledBatch
from tandem.daemons.settings.schema import ModelSection, RunConfig
from tandem.protocol.weights import WeightBlob
from tests.daemons.configs import run_config

TWO_STATES = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
VECTOR = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
DEVICES = ["cpu"] + (["cuda:0"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny networks run fastest on one thread, as actors and learners are configured by default."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def linear_q(obs_space, num_actions, model_cfg):
    """model.kind 'tests.daemons.algorithms.test_dqn:linear_q': Q = W obs, so tests can set Q-values by hand."""
    return nn.Linear(obs_space.shape[0], num_actions, bias=False)


def batch(obs, actions, returns, next_obs, discounts, weights=None) -> SampledBatch:
    size = len(returns)
    return SampledBatch(
        obs=np.asarray(obs, dtype=np.float32),
        actions=np.asarray(actions, dtype=np.int64),
        returns=np.asarray(returns, dtype=np.float32),
        next_obs=np.asarray(next_obs, dtype=np.float32),
        discounts=np.asarray(discounts, dtype=np.float32),
        versions=np.zeros(size, np.int64),
        indices=np.arange(size, dtype=np.int64),
        weights=np.ones(size, np.float32) if weights is None else np.asarray(weights, dtype=np.float32),
    )


def random_batch(rng: np.random.Generator, size: int = 16, num_actions: int = 4) -> SampledBatch:
    return batch(
        rng.normal(size=(size, 3)),
        rng.integers(num_actions, size=size),
        rng.normal(size=size),
        rng.normal(size=(size, 3)),
        rng.choice([0.0, 0.99], size=size),
    )


def algo_cfg(**kwargs) -> DQNSection:
    return DQNSection(**{"learning_rate": 1e-3, "target_update_interval": 100, **kwargs})


def mlp_algo(device="cpu", seed=0, num_actions=4, **kwargs) -> DoubleDQN:
    config = run_config(seed, model=ModelSection(hidden_sizes=[16]), algorithm=algo_cfg(**kwargs))
    return DoubleDQN(config, VECTOR, gym.spaces.Discrete(num_actions), device=device)


# ------------------------------------------------------------------------------------------- learner


@pytest.mark.parametrize("device", DEVICES)
def test_q_values_converge_on_a_two_state_mdp(device):
    # s0 -a0-> s0 (r 0.5), s0 -a1-> s1 (r 0), s1 -a0-> terminal (r 1), s1 -a1-> s1 (r 2); gamma 0.5.
    # Q*(s1, a1) = 2 + 0.5 * 4 = 4, Q*(s1, a0) = 1, Q*(s0, a1) = 0.5 * 4 = 2, Q*(s0, a0) = 0.5 + 0.5 * 2 = 1.5.
    s0, s1 = [1.0, 0.0], [0.0, 1.0]
    data = batch(
        obs=[s0, s0, s1, s1],
        actions=[0, 1, 0, 1],
        returns=[0.5, 0.0, 1.0, 2.0],
        next_obs=[s0, s1, s1, s1],
        discounts=[0.5, 0.5, 0.0, 0.5],
    )
    config = run_config(
        0, model=ModelSection(hidden_sizes=[32]), algorithm=algo_cfg(learning_rate=1e-2, target_update_interval=20)
    )
    algo = DoubleDQN(config, TWO_STATES, gym.spaces.Discrete(2), device=device)
    for _ in range(400):
        result = algo.update(data)
    with torch.no_grad():
        q = algo.online(torch.tensor([s0, s1], device=device)).cpu().numpy()
    np.testing.assert_allclose(q, [[1.5, 2.0], [1.0, 4.0]], atol=0.01)
    assert result.metrics["td_abs_mean"] < 0.01


def test_target_uses_online_argmax_and_target_value():
    config = run_config(
        0,
        model=ModelSection(kind="tests.daemons.algorithms.test_dqn:linear_q"),
        algorithm=algo_cfg(learning_rate=1e-6, huber_delta=1.0),
    )
    algo = DoubleDQN(config, TWO_STATES, gym.spaces.Discrete(3))
    state = algo.state_dict()
    # Q(obs) = W @ obs. At next_obs = [1, 0] the online net prefers action 2, the target net action 0.
    state["online"]["weight"] = torch.tensor([[0.0, 0.0], [0.0, 0.5], [5.0, 0.0]])
    state["target"]["weight"] = torch.tensor([[10.0, 0.0], [0.0, 0.0], [3.0, 0.0]])
    algo.load_state_dict(state)
    data = batch(
        obs=[[0, 1], [0, 1]],
        actions=[1, 1],
        returns=[1.0, 1.0],
        next_obs=[[1, 0], [1, 0]],
        discounts=[0.81, 0.0],
        weights=[0.5, 1.0],
    )
    result = algo.update(data)
    # Double DQN: 1 + 0.81 * Q_target(next, argmax Q_online) = 1 + 0.81 * 3 (vanilla DQN would use 10).
    expected_td = np.array([1.0 + 0.81 * 3.0 - 0.5, 1.0 - 0.5], dtype=np.float32)
    assert result.priorities.dtype == np.float32 and result.priorities.shape == (2,)
    np.testing.assert_allclose(result.priorities, expected_td, rtol=1e-5)
    huber = np.where(expected_td <= 1.0, 0.5 * expected_td**2, expected_td - 0.5)
    assert result.metrics["loss"] == pytest.approx(float(np.mean([0.5, 1.0] * huber)), rel=1e-5)
    assert result.metrics["q_mean"] == pytest.approx(0.5)
    assert result.metrics["td_abs_mean"] == pytest.approx(float(expected_td.mean()), rel=1e-5)
    assert set(result.metrics) == {"loss", "q_mean", "td_abs_mean", "grad_norm"}


def test_priorities_are_the_absolute_td_errors_before_the_step():
    algo = mlp_algo()
    data = random_batch(np.random.default_rng(1))
    with torch.no_grad():
        q = algo.online(torch.from_numpy(data.obs))[torch.arange(16), torch.from_numpy(data.actions)]
        best = algo.online(torch.from_numpy(data.next_obs)).argmax(1)
        boot = algo.target(torch.from_numpy(data.next_obs))[torch.arange(16), best]
        td = torch.from_numpy(data.returns) + torch.from_numpy(data.discounts) * boot - q
    result = algo.update(data)
    np.testing.assert_allclose(result.priorities, td.abs().numpy(), rtol=1e-5, atol=1e-6)


def test_target_net_is_copied_every_interval_updates():
    algo = mlp_algo(target_update_interval=3, learning_rate=1e-2)
    rng = np.random.default_rng(2)
    initial = algo.state_dict()["online"]

    def same(a, b):
        return all(torch.equal(a[k], b[k]) for k in a)

    for step in range(1, 7):
        algo.update(random_batch(rng))
        state = algo.state_dict()
        assert not same(state["online"], initial)
        if step in (3, 6):
            assert same(state["target"], state["online"])
        elif step < 3:
            assert same(state["target"], initial)
        else:
            assert not same(state["target"], state["online"])
    assert algo.updates == 6


def test_gradient_clipping_and_grad_norm_metric():
    rng = np.random.default_rng(3)
    data = random_batch(rng)
    unclipped = mlp_algo(max_grad_norm=0.0).update(data).metrics["grad_norm"]
    clipped = mlp_algo(max_grad_norm=1e-3).update(data).metrics["grad_norm"]
    assert unclipped == pytest.approx(clipped, rel=1e-5)  # the norm before clipping is reported either way
    assert unclipped > 1e-3


def test_weights_are_float32_cpu_copies():
    algo = mlp_algo()
    weights = algo.weights()
    assert list(weights) == list(algo.online.state_dict())
    assert all(w.dtype == np.float32 for w in weights.values())
    snapshot = {k: v.copy() for k, v in weights.items()}
    for w in weights.values():
        w[...] = 123.0
    assert all(np.array_equal(algo.weights()[k], snapshot[k]) for k in snapshot)
    algo.update(random_batch(np.random.default_rng(4)))
    fresh = algo.weights()
    assert all(np.all(w == 123.0) for w in weights.values())  # training did not write into the sent copies
    assert not all(np.array_equal(fresh[k], snapshot[k]) for k in snapshot)


def test_read_only_batches_give_no_warnings():
    data = random_batch(np.random.default_rng(5))
    frozen = {
        name: np.frombuffer(getattr(data, name).tobytes(), dtype=getattr(data, name).dtype).reshape(
            getattr(data, name).shape
        )
        for name in ("obs", "actions", "returns", "next_obs", "discounts", "weights")
    }
    read_only = SampledBatch(versions=data.versions, indices=data.indices, **frozen)
    assert not read_only.obs.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mlp_algo().update(read_only)


def test_bad_actions_are_rejected_before_touching_the_device():
    data = random_batch(np.random.default_rng(6), num_actions=4)
    bad = SampledBatch(**{**data.__dict__, "actions": np.full(16, 4, dtype=np.int64)})
    with pytest.raises(ValueError, match="outside the action space"):
        mlp_algo().update(bad)


def test_load_state_dict_checks_the_model_and_keeps_the_configured_learning_rate():
    state = mlp_algo(learning_rate=1e-3).state_dict()
    other = mlp_algo(learning_rate=5e-4)
    other.load_state_dict(state)
    assert other.optimizer.param_groups[0]["lr"] == 5e-4
    wider = DoubleDQN(
        run_config(None, model=ModelSection(hidden_sizes=[32]), algorithm=algo_cfg()), VECTOR, gym.spaces.Discrete(4)
    )
    with pytest.raises(ValueError, match="online network does not fit.*shape"):
        wider.load_state_dict(state)


def test_discrete_action_spaces_with_a_start_offset():
    space = gym.spaces.Discrete(3, start=-1)
    config = run_config(0, model=ModelSection(hidden_sizes=[8]), algorithm=algo_cfg())
    algo = DoubleDQN(config, VECTOR, space)
    policy = DQNPolicy(config, VECTOR, space, seed=0)
    actions = policy.act(np.zeros((200, 3), np.float32), np.ones(200))
    assert set(actions.tolist()) == {-1, 0, 1}
    rng = np.random.default_rng(7)
    algo.update(batch(rng.normal(size=(4, 3)), [-1, 0, 1, 1], np.zeros(4), rng.normal(size=(4, 3)), np.zeros(4)))


# -------------------------------------------------------------------------------------------- policy


def trained(seed: int, steps: int = 20) -> DoubleDQN:
    algo = mlp_algo(seed=seed, learning_rate=1e-2)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        algo.update(random_batch(rng))
    return algo


def greedy_of(algo: DoubleDQN, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return algo.online(torch.from_numpy(obs)).argmax(1).numpy()


def policy(seed: int = 0) -> DQNPolicy:
    return DQNPolicy(run_config(model=ModelSection(hidden_sizes=[16])), VECTOR, gym.spaces.Discrete(4), seed=seed)


OBS = np.random.default_rng(10).normal(size=(256, 3)).astype(np.float32)


def test_policy_acts_before_any_weights_arrive():
    pol = policy()
    assert not pol.has_weights
    actions = pol.act(OBS, np.zeros(len(OBS)))
    assert actions.dtype == np.int64 and actions.shape == (256,)
    assert set(actions.tolist()) <= {0, 1, 2, 3}


def test_epsilon_zero_is_greedy_for_the_loaded_weights():
    algo, pol = trained(1), policy()
    pol.load_weights(algo.weights())
    assert pol.has_weights
    expected = greedy_of(algo, OBS)
    assert len(set(expected.tolist())) > 1  # a meaningful check: the greedy action varies with obs
    np.testing.assert_array_equal(pol.act(OBS, np.zeros(len(OBS))), expected)


def test_epsilon_one_is_uniform_and_epsilons_are_per_env():
    pol = policy()
    counts = np.bincount(pol.act(np.zeros((4000, 3), np.float32), np.ones(4000)), minlength=4)
    assert np.all(np.abs(counts - 1000) < 150), counts
    algo = trained(2)
    pol.load_weights(algo.weights())
    obs = np.repeat(OBS, 8, axis=0)
    eps = np.tile([0.0, 1.0], len(obs) // 2)
    actions, greedy = pol.act(obs, eps), greedy_of(algo, obs)
    np.testing.assert_array_equal(actions[eps == 0.0], greedy[eps == 0.0])
    agree = np.mean(actions[eps == 1.0] == greedy[eps == 1.0])
    assert 0.2 < agree < 0.3  # uniform over 4 actions agrees with greedy a quarter of the time


def test_policy_exploration_is_seeded():
    first, second = policy(seed=5), policy(seed=5)
    eps = np.full(len(OBS), 0.5)
    np.testing.assert_array_equal(first.act(OBS, eps), second.act(OBS, eps))
    assert not np.array_equal(policy(seed=6).act(OBS, eps), policy(seed=5).act(OBS, eps))


def test_act_checks_shapes():
    with pytest.raises(ValueError, match="epsilons"):
        policy().act(OBS, np.zeros(3))


def bad_variants(good: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    last = list(good)[-1]  # corrupt the last tensor: a loader that is not all-or-nothing has loaded the rest
    return {
        "missing": {k: v for k, v in good.items() if k != last},
        "shape": {**good, last: np.zeros(good[last].size + 1, np.float32)},
        "dtype": {**good, last: good[last].astype(np.float64)},
        "unknown": {**good, "extra.weight": np.zeros(3, np.float32)},
        "type": {**good, last: good[last].tolist()},
    }


@pytest.mark.parametrize("variant", ["missing", "shape", "dtype", "unknown", "type"])
def test_load_weights_is_all_or_nothing(variant):
    old, new = trained(1), trained(3)
    pol = policy()
    pol.load_weights(old.weights())
    before = pol.act(OBS, np.zeros(len(OBS)))
    assert not np.array_equal(before, greedy_of(new, OBS))  # loading `new` would change the actions
    bad = bad_variants(new.weights())[variant]
    with pytest.raises(ValueError, match="tensor '(layers.2.bias|extra.weight)'"):
        pol.load_weights(bad)
    np.testing.assert_array_equal(pol.act(OBS, np.zeros(len(OBS))), before)
    pol.load_weights(new.weights())  # and the policy still takes good weights afterwards
    np.testing.assert_array_equal(pol.act(OBS, np.zeros(len(OBS))), greedy_of(new, OBS))


def test_weights_round_trip_through_weight_blob_frames():
    algo, pol = trained(4), policy()
    frames = WeightBlob.build("policy-0", 7, algo.updates, algo.weights()).to_frames()
    received = WeightBlob.from_frames([bytes(f) for f in frames])  # as a socket would hand them over
    received.verify_checksum()
    assert not next(iter(received.tensors.values())).flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pol.load_weights(received.tensors)
        actions = pol.act(OBS, np.zeros(len(OBS)))
    np.testing.assert_array_equal(actions, greedy_of(algo, OBS))


# ---------------------------------------------------------------------------------------- factories


def test_factories_build_from_the_run_config():
    config = RunConfig()
    config.model.hidden_sizes = [8]
    algo = make_algorithm(config, VECTOR, gym.spaces.Discrete(2), "cpu")
    pol = make_policy(config, VECTOR, gym.spaces.Discrete(2), seed=1)
    assert isinstance(algo, DoubleDQN) and isinstance(pol, DQNPolicy)
    pol.load_weights(algo.weights())


def test_factories_reject_continuous_actions_and_unknown_algorithms():
    config = RunConfig()
    with pytest.raises(ValueError, match="needs a Discrete action space"):
        make_algorithm(config, VECTOR, gym.spaces.Box(-1, 1, (2,)), "cpu")
    with pytest.raises(ValueError, match="needs a Discrete action space"):
        make_policy(config, VECTOR, gym.spaces.Box(-1, 1, (2,)), seed=0)
    config.algorithm.name = "ppo"
    with pytest.raises(ValueError, match="algorithm.name 'ppo' is not one of: double_dqn, appo, impala"):
        make_algorithm(config, VECTOR, gym.spaces.Discrete(2), "cpu")


def test_cuda_device_without_cuda_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="CUDA is not available"):
        mlp_algo(device="cuda:0")
