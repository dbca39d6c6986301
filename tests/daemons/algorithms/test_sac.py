"""SAC's parts against hand-computed cases: the squashed log-probability, the critic target, the policy and
temperature losses, the Polyak step, and a few updates on Pendulum's spaces."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from tandem.daemons.algorithms.sac.learner import SAC, SACPolicy
from tandem.daemons.algorithms.sac.nets import SquashedGaussianPolicy, squashed_log_prob
from tandem.daemons.algorithms.sac.spec import SACSection
from tandem.daemons.config.loader import load_config
from tandem.daemons.replay.batch import SampledBatch
from tandem.daemons.serial.loop import run_serial
from tandem.daemons.settings.schema import ModelSection
from tests.daemons.configs import run_config, seeded

OBS = gym.spaces.Box(-8.0, 8.0, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
SMALL = run_config(model=ModelSection(hidden_sizes=[16, 16]), algorithm=SACSection(learning_rate=1e-2, tau=0.1))


def batch(size: int = 8, seed: int = 0) -> SampledBatch:
    rng = np.random.default_rng(seed)
    return SampledBatch(
        obs=rng.normal(size=(size, 3)).astype(np.float32),
        actions=rng.uniform(-2, 2, size=(size, 1)).astype(np.float32),
        returns=rng.normal(size=size).astype(np.float32),
        next_obs=rng.normal(size=(size, 3)).astype(np.float32),
        discounts=np.where(rng.random(size) < 0.25, 0.0, 0.99).astype(np.float32),
        versions=np.zeros(size, np.int64),
        indices=np.arange(size, dtype=np.int64),
        weights=np.ones(size, np.float32),
    )


def test_the_squashed_log_probability_is_the_change_of_variables_of_a_gaussian():
    mean, log_std = torch.tensor([[0.3, -1.0]]), torch.tensor([[-0.5, 0.2]])
    scale = torch.tensor([2.0, 0.5])
    u = torch.tensor([[0.7, -0.2]])
    # by hand: log N(u; mean, std) - log(scale * (1 - tanh(u)^2)), summed over dimensions
    expected = 0.0
    for i in range(2):
        std = math.exp(log_std[0, i])
        normal = -0.5 * ((u[0, i] - mean[0, i]) / std) ** 2 - math.log(std) - 0.5 * math.log(2 * math.pi)
        expected += normal - math.log(scale[i] * (1 - math.tanh(u[0, i]) ** 2))
    got = squashed_log_prob(u, mean, log_std, scale)
    assert got.item() == pytest.approx(float(expected), abs=1e-4)


def test_actions_fall_on_the_bounds_and_the_mode_is_tanh_of_the_mean():
    box = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([3.0, 1.0], np.float32))
    net = SquashedGaussianPolicy(3, box, (8,), "relu")
    obs = torch.randn(64, 3)
    actions, logp = net.sample(obs)
    assert actions.shape == (64, 2) and logp.shape == (64,)
    assert torch.all(actions[:, 0] >= -1) and torch.all(actions[:, 0] <= 3)
    assert torch.all(actions[:, 1] >= 0) and torch.all(actions[:, 1] <= 1)
    mean, _ = net(obs)
    expected = torch.tanh(mean) * torch.tensor([2.0, 0.5]) + torch.tensor([1.0, 0.5])
    assert torch.allclose(net.mode(obs), expected)


def test_the_critic_target_is_the_soft_bellman_backup_from_the_smaller_target_q():
    sac = SAC(seeded(SMALL, 3), OBS, ACT)
    b = batch()
    obs, next_obs = torch.as_tensor(b.obs), torch.as_tensor(b.next_obs)
    actions, returns, discounts = torch.as_tensor(b.actions), torch.as_tensor(b.returns), torch.as_tensor(b.discounts)
    alpha = torch.tensor(0.3)
    state = sac.generator.get_state()
    with torch.no_grad():  # by hand, with the same noise
        next_a, next_logp = sac.policy.sample(next_obs, sac.generator)
        t1, t2 = sac.target(next_obs, next_a)
        y = returns + discounts * (torch.minimum(t1, t2) - 0.3 * next_logp)
        q1, q2 = sac.critic(obs, actions)
        expected = 0.5 * ((q1 - y) ** 2).mean() + 0.5 * ((q2 - y) ** 2).mean()
    sac.generator.set_state(state)
    loss, got_y = sac.critic_loss(obs, actions, returns, discounts, next_obs, alpha)
    assert torch.allclose(got_y, y) and loss.item() == pytest.approx(expected.item(), rel=1e-6)
    # a terminated transition (discount 0) bootstraps nothing: its target is its return
    done = b.discounts == 0
    assert done.any() and torch.allclose(got_y[torch.as_tensor(done)], returns[torch.as_tensor(done)])


def test_the_policy_loss_is_alpha_logp_minus_the_smaller_q():
    sac = SAC(seeded(SMALL, 4), OBS, ACT)
    obs = torch.as_tensor(batch().obs)
    state = sac.generator.get_state()
    with torch.no_grad():
        a, logp = sac.policy.sample(obs, sac.generator)
        q1, q2 = sac.critic(obs, a)
        expected = (0.2 * logp - torch.minimum(q1, q2)).mean()
    sac.generator.set_state(state)
    loss, got_logp = sac.policy_loss(obs, torch.tensor(0.2))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6) and torch.allclose(got_logp, logp)


@pytest.mark.parametrize("entropy_gap, grows", [(+1.0, True), (-1.0, False)])
def test_the_temperature_rises_while_the_entropy_is_under_its_target_and_falls_above(entropy_gap, grows):
    sac = SAC(seeded(SMALL, 5), OBS, ACT)
    assert sac.target_entropy == -1.0  # -(action dimensions)
    # log pi = -(entropy); entropy under the target by `entropy_gap`: log pi + target = entropy_gap
    logp = torch.full((8,), entropy_gap - sac.target_entropy)
    loss = sac.alpha_loss(logp)
    assert loss.item() == pytest.approx(-(math.log(1.0) * entropy_gap))
    before = sac.log_alpha.item()
    sac.step(sac.optimizers["alpha"], loss, [sac.log_alpha])
    assert (sac.log_alpha.item() > before) == grows


def test_an_update_moves_the_targets_a_tau_step_towards_the_critic_and_reports_its_losses():
    sac = SAC(seeded(SMALL, 6), OBS, ACT)
    old_target = [p.detach().clone() for p in sac.target.parameters()]
    result = sac.update(batch())
    for old, target, online in zip(old_target, sac.target.parameters(), sac.critic.parameters()):
        assert torch.allclose(target, (1 - SMALL.algorithm.tau) * old + SMALL.algorithm.tau * online, atol=1e-6)
    assert {"critic_loss", "policy_loss", "alpha_loss", "alpha", "entropy", "loss"} <= set(result.metrics)
    assert all(math.isfinite(v) for v in result.metrics.values())


def test_state_round_trips_and_the_policy_acts_within_bounds_with_the_learners_weights():
    sac = SAC(seeded(SMALL, 7), OBS, ACT)
    for i in range(3):
        sac.update(batch(seed=i))
    again = SAC(seeded(SMALL, 99), OBS, ACT)
    again.load_state_dict(sac.state_dict())
    b = batch(seed=10)
    sac.generator.manual_seed(1)
    again.generator.manual_seed(1)
    assert sac.update(b).metrics == pytest.approx(again.update(b).metrics)
    policy = SACPolicy(SMALL, OBS, ACT, seed=1)
    policy.load_weights(sac.weights())
    obs = batch(64).obs
    explored, extras = policy.explore(obs, np.zeros(64))
    greedy = policy.act(obs, np.zeros(64))
    assert explored.shape == greedy.shape == (64, 1) and extras == {}
    assert np.all(np.abs(explored) <= 2.0) and np.all(np.abs(greedy) <= 2.0)
    with torch.no_grad():
        assert np.allclose(greedy, sac.policy.mode(torch.as_tensor(obs)).numpy(), atol=1e-6)


def test_batches_with_actions_outside_the_bounds_or_of_the_wrong_shape_are_refused():
    sac = SAC(seeded(SMALL, 8), OBS, ACT)

    class Batch:
        def __init__(self, actions):
            self.actions = actions

    sac.check_batch(Batch(np.zeros((4, 2, 1), np.float32)))
    for bad in (
        np.full((4, 2, 1), 2.5, np.float32),
        np.zeros((4, 2), np.float32),
        np.zeros((4, 2, 1), np.int64),
        np.full((4, 2, 1), np.nan, np.float32),
    ):
        with pytest.raises(ValueError):
            sac.check_batch(Batch(bad))


def test_a_discrete_or_unbounded_action_space_is_refused():
    with pytest.raises(ValueError, match="Box"):
        SAC(SMALL, OBS, gym.spaces.Discrete(3))
    with pytest.raises(ValueError, match="bounded"):
        SAC(SMALL, OBS, gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))


@pytest.mark.timeout(120)
def test_the_halfcheetah_example_trains_serially_on_a_real_mujoco_env(tmp_path):
    """The MuJoCo example as shipped (6-D actions), through serial mode's real env, replay and learner."""
    pytest.importorskip("mujoco", reason="the mujoco extra is not installed (pip install -e '.[mujoco]')")
    example = Path(__file__).resolve().parents[3] / "examples" / "halfcheetah_sac.toml"
    config = load_config(
        example, ["stop.env_steps=1000", "learner.replay_min_size=300", "run.seed=3", "eval.enabled=false"]
    )
    result = run_serial(config, eval_every=10**9)
    assert result.reason == "1000 env steps >= 1000"
    # an update per env step once the replay holds 300 (SB3's train_freq = gradient_steps = 1)
    assert 600 <= result.figures["updates"] <= 1000, result.figures
    assert result.figures["batches_malformed"] == 0
    outputs = [t for name, t in result.weights.items() if name.endswith("weight")][-1]
    assert outputs.shape[0] == 2 * 6  # a mean and a log-std per action dimension
    assert all(np.isfinite(t).all() for t in result.weights.values())


def test_uniform_warmup_actions_cover_the_box_within_its_bounds_and_repeat_for_a_seed():
    from tandem.daemons.actor.warmup import UniformActions

    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
    actions = UniformActions(space, seed=3)(5000)
    assert actions.shape == (5000, 2) and actions.dtype == np.float32
    assert (actions >= space.low).all() and (actions <= space.high).all()
    # uniform: each quarter of each dimension's range holds about a quarter of the draws
    for d in range(2):
        quarters = np.histogram(actions[:, d], bins=4, range=(space.low[d], space.high[d]))[0] / 5000
        assert np.allclose(quarters, 0.25, atol=0.03), quarters
    assert np.array_equal(UniformActions(space, seed=3)(10), UniformActions(space, seed=3)(10))
    with pytest.raises(ValueError, match="bounded Box"):
        UniformActions(gym.spaces.Box(-np.inf, np.inf, (1,), np.float32), seed=0)


@pytest.mark.parametrize("warmup", [True, False])
def test_actors_act_uniformly_while_they_hold_the_untrained_version_and_by_the_policy_after(warmup):
    """Version 0 is a learner's untrained weights: with uniform_warmup the actor's actions are then the uniform
    draws of its own seeded generator, whatever it observes; once a trained version is loaded (or without the
    warm-up) the policy acts."""
    from tandem.daemons.acting.stepping import actor_seed
    from tandem.daemons.actor.warmup import UniformActions
    from tandem.daemons.serial.parts import SerialActor

    example = Path(__file__).resolve().parents[3] / "examples" / "pendulum_sac.toml"
    config = load_config(example, [f"algorithm.uniform_warmup={str(warmup).lower()}", "run.seed=5"])
    actor = SerialActor(config)
    try:
        weights = SACPolicy(config, actor.spaces.observation_space, ACT, seed=1).nets.current.state_dict()
        weights = {name: t.numpy() for name, t in weights.items()}
        uniform = UniformActions(actor.spaces.action_space, actor_seed(config, 0))

        def acted(version: int) -> tuple[np.ndarray, np.ndarray]:
            """The next unroll's actions [T, K, 1] acted with `version`, and the uniform draws of as many ticks."""
            actor.load(version, weights)
            (batch,) = actor.unrolls()
            actions = np.asarray(batch.actions)
            return actions, np.stack([uniform(actions.shape[1]) for _ in range(actions.shape[0])])

        untrained, draws = acted(0)
        assert np.array_equal(untrained, draws) == warmup
        trained, draws = acted(1)
        assert not np.array_equal(trained, draws) and (np.abs(trained) <= 2.0).all()
    finally:
        actor.close()
