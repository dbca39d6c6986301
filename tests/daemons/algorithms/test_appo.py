"""APPO/IMPALA parts: action distributions against torch.distributions, actor and learner agreeing on
log-probs, updates on real unrolls for every action space, learning a bandit, checkpoints, bad batches."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from tandem.daemons.algorithms import make_algorithm, make_policy
from tandem.daemons.algorithms.distributions import ActionHead, Categorical, DiagGaussian
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.envs.spaces import env_actions
from tandem.protocol import TransitionBatch, WeightBlob
from tests.protocol.samples import batch_of

VECTOR = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
SPACES = {
    "discrete": gym.spaces.Discrete(3, start=1),
    "multi_discrete": gym.spaces.MultiDiscrete([2, 4], start=[0, -1]),
    "box": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
}


def appo_config(name="appo", **algorithm):
    return config_from_dict(
        {
            "algorithm": {"name": name, "batch_size": 32, **algorithm},
            "model": {"hidden_sizes": [16]},
            "run": {"seed": 3},
        }
    )


def test_gaussian_log_probs_and_entropy_equal_torch_distributions():
    gen = torch.Generator().manual_seed(0)
    mean, log_std = torch.randn(6, 3, generator=gen), torch.randn(3, generator=gen) * 0.5
    dist = DiagGaussian(mean, log_std)
    actions = dist.sample(gen)
    reference = torch.distributions.Normal(mean, log_std.exp().expand_as(mean))
    torch.testing.assert_close(dist.log_prob(actions), reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(dist.entropy(), reference.entropy().sum(-1))


def test_categorical_parts_equal_torch_distributions():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 2 + 4, generator=gen)
    dist = Categorical(logits, [2, 4])
    picks = dist.sample(gen)
    first, second = (torch.distributions.Categorical(logits=part) for part in torch.split(logits, [2, 4], dim=-1))
    torch.testing.assert_close(dist.log_prob(picks), first.log_prob(picks[:, 0]) + second.log_prob(picks[:, 1]))
    torch.testing.assert_close(dist.entropy(), first.entropy() + second.entropy())


def test_a_box_action_travels_unclipped_and_reaches_the_env_clipped():
    head = ActionHead(SPACES["box"], log_std_init=1.5)  # wide: many samples fall outside [-2, 2]
    with torch.no_grad():
        dist = head.distribution(torch.zeros(512, 2))
        wire = head.to_wire(dist.sample(torch.Generator().manual_seed(2)))
    assert (wire.abs() > 2.0).any(), "the sample should reach past the bounds"
    sent = env_actions(SPACES["box"], wire.numpy())
    assert sent.min() >= -2.0 and sent.max() <= 2.0
    # the log-prob is of the unclipped sample, not of the clipped action
    with torch.no_grad():
        torch.testing.assert_close(dist.log_prob(head.from_wire(wire)), dist.log_prob(wire))
        assert not torch.allclose(dist.log_prob(torch.as_tensor(sent)), dist.log_prob(wire))


def test_multi_discrete_actions_keep_their_start_values_on_the_wire():
    head = ActionHead(SPACES["multi_discrete"])
    wire = head.to_wire(torch.tensor([[0, 0], [1, 3]]))
    assert wire.tolist() == [[0, -1], [1, 2]]
    assert head.from_wire(wire).tolist() == [[0, 0], [1, 3]]
    head.check_wire(wire.numpy())
    with pytest.raises(ValueError, match="outside the action space"):
        head.check_wire(np.array([[0, 3]]))


def unroll_from_policy(policy, steps=8, envs=4, seed=0, version=0) -> TransitionBatch:
    """An unroll whose actions and log-probs come from `policy`, with one terminated and one truncated step."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (steps + 1, envs, 3)).astype(np.float32)
    actions, logps = [], []
    for t in range(steps):
        a, extras = policy.explore(obs[t], np.zeros(envs))
        actions.append(a)
        logps.append(extras[BEHAVIOUR_LOGP])
    terminated, truncated = np.zeros((steps, envs), bool), np.zeros((steps, envs), bool)
    terminated[2, 1], truncated[5, 3] = True, True
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    final_obs = rng.uniform(-1, 1, (1, 3)).astype(np.float32)
    extras = {BEHAVIOUR_LOGP: np.stack(logps)}
    arrays = (obs, np.stack(actions), rewards, terminated, truncated, final_obs, extras)
    return batch_of(*arrays, incarnation=0, seq=seed, version=version, env_steps=0)


@pytest.mark.parametrize("kind", list(SPACES))
@pytest.mark.parametrize("name,shared", [("appo", False), ("impala", False), ("appo", True)])
def test_actor_and_learner_agree_and_an_update_runs(kind, name, shared):
    config, space = appo_config(name, shared_torso=shared), SPACES[kind]
    learner = make_algorithm(config, VECTOR, space, "cpu")
    policy = make_policy(config, VECTOR, space, seed=5)
    policy.load_weights(learner.weights())
    batch = unroll_from_policy(policy)
    assert batch.actions.shape == (8, 4, *(space.shape or ()))
    learner.check_batch(batch)
    # The learner's log-prob of what the actor did equals what the actor sent (same weights): rho = 1.
    with torch.no_grad():
        flat_obs = torch.as_tensor(batch.obs[:-1].reshape(32, 3))
        wire = torch.as_tensor(batch.actions.reshape(32, *batch.actions.shape[2:]))
        logp = learner.net.distribution(flat_obs).log_prob(learner.net.head.from_wire(wire))
    np.testing.assert_allclose(logp.numpy(), batch.extras[BEHAVIOUR_LOGP].reshape(32), rtol=1e-5, atol=1e-5)
    before = {k: v.copy() for k, v in learner.weights().items()}
    result = learner.update([batch, unroll_from_policy(policy, seed=1)])
    assert all(np.isfinite(v) for v in result.metrics.values())
    assert result.metrics["rho_mean"] == pytest.approx(1.0, abs=1e-4)  # first pass: behaviour = target
    assert any(not np.array_equal(before[k], v) for k, v in learner.weights().items())
    # the evaluator's choice: the mode, in the space
    greedy = policy.act(batch.obs[0], np.zeros(4))
    assert np.asarray(env_actions(space, greedy)).shape == (4, *(space.shape or ()))


def play_the_bandit(learner, policy, updates: int = 60) -> float:
    """`updates` rounds of one-step episodes in 32 envs, where arm 1 pays 1 and arm 0 pays 0, the policy acting with
    the learner's latest weights: the probability of arm 1 the learner ends with."""
    obs = np.zeros((2, 32, 3), np.float32)
    for update in range(updates):
        policy.load_weights(learner.weights())
        actions, extras = policy.explore(obs[0], np.zeros(32))
        # every step ends its episode, rewarded with the arm taken
        ends, rewards = (np.ones((1, 32), bool), np.zeros((1, 32), bool)), actions[None].astype(np.float32)
        arrays = (obs, actions[None], rewards, *ends, np.zeros((0, 3), np.float32))
        behaviour = {BEHAVIOUR_LOGP: extras[BEHAVIOUR_LOGP][None]}
        batch = batch_of(*arrays, behaviour, actor="a", incarnation=0, seq=update, version=update, env_steps=0)
        learner.update([batch])
    with torch.no_grad():
        return learner.net.distribution(torch.zeros(1, 3)).log_prob(torch.ones(1, 1, dtype=torch.long)).exp().item()


def test_appo_learns_a_two_armed_bandit():
    """Arm 1 pays 1, arm 0 pays 0, every step ends its episode: the policy must come to prefer arm 1."""
    config = appo_config(learning_rate=3e-3, epochs=4, entropy_coef=0.0)
    space = gym.spaces.Discrete(2)
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=1)
    p_arm_1 = play_the_bandit(learner, policy)
    assert p_arm_1 > 0.9, p_arm_1


def test_a_shared_torso_is_one_network_whose_last_output_is_the_value():
    config, space = (
        appo_config(shared_torso=True, learning_rate=3e-3, epochs=4, entropy_coef=0.0),
        gym.spaces.Discrete(2),
    )
    learner = make_algorithm(config, VECTOR, space, "cpu")
    names = set(learner.weights())
    assert names and all(k.startswith("policy.") for k in names)  # no second (value) network
    separate = make_algorithm(appo_config(), VECTOR, space, "cpu")
    assert sum(v.size for v in learner.weights().values()) < 0.7 * sum(v.size for v in separate.weights().values())
    obs = torch.as_tensor(np.random.default_rng(0).uniform(-1, 1, (6, 3)).astype(np.float32))
    with torch.no_grad():
        dist, values = learner.net.evaluate(obs, 4)
        out = learner.net.policy(obs)
        np.testing.assert_allclose(values.numpy(), out[:, -1].numpy(), rtol=1e-6)
        np.testing.assert_allclose(values.numpy(), learner.net.values(obs).numpy(), rtol=1e-6)
        actions = torch.zeros(4, 1, dtype=torch.long)
        np.testing.assert_allclose(
            dist.log_prob(actions).numpy(), learner.net.distribution(obs[:4]).log_prob(actions).numpy(), rtol=1e-6
        )
    # it learns: the bandit of the test above, with one network
    p_arm_1 = play_the_bandit(learner, make_policy(config, VECTOR, space, seed=1))
    assert p_arm_1 > 0.9, p_arm_1
    # a checkpoint of the other form is refused, saying which setting it was trained with
    with pytest.raises(
        ValueError, match=r"does not fit this model \(it was trained with algorithm.shared_torso = true"
    ):
        separate.load_state_dict(learner.state_dict())
    with pytest.raises(ValueError, match=r"shared_torso = false; this run has true"):
        learner.load_state_dict(separate.state_dict())


def test_bad_batches_are_refused_with_a_reason():
    config, space = appo_config(), SPACES["discrete"]
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=0)
    good = unroll_from_policy(policy)
    cases = {
        "is missing": dataclasses.replace(good, extras={}),
        "must be float32": dataclasses.replace(
            good, extras={BEHAVIOUR_LOGP: good.extras[BEHAVIOUR_LOGP].astype(np.float64)}
        ),
        "NaN": dataclasses.replace(good, extras={BEHAVIOUR_LOGP: np.full((8, 4), np.nan, np.float32)}),
        "outside the action space": dataclasses.replace(good, actions=np.zeros((8, 4), np.int64)),  # start is 1
        "must be integers": dataclasses.replace(good, actions=good.actions.astype(np.float32)),
    }
    for reason, batch in cases.items():
        with pytest.raises(ValueError, match=reason):
            learner.check_batch(batch)


def test_state_round_trip_and_foreign_states_are_refused():
    config, space = appo_config(), SPACES["box"]
    learner = make_algorithm(config, VECTOR, space, "cpu")
    learner.update([unroll_from_policy(make_policy(config, VECTOR, space, seed=0))])
    state = learner.state_dict()
    other = make_algorithm(appo_config(), VECTOR, space, "cpu")
    other.load_state_dict(state)
    for key, value in learner.weights().items():
        np.testing.assert_array_equal(other.weights()[key], value)
    assert other.updates == 1
    with pytest.raises(ValueError, match="not 'appo'"):
        other.load_state_dict({**state, "algorithm": "double_dqn"})
    wider = make_algorithm(
        config_from_dict({"algorithm": {"name": "appo"}, "model": {"hidden_sizes": [32]}}), VECTOR, space, "cpu"
    )
    with pytest.raises(ValueError, match="does not fit this model"):
        wider.load_state_dict(state)


def test_a_state_dependent_log_std_comes_from_the_network_and_trains():
    config, space = appo_config(state_dependent_std=True, log_std_init=-0.5), SPACES["box"]
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=2)
    assert learner.net.head.num_outputs == 4 and not any("log_std" in k for k in learner.weights())
    with torch.no_grad():
        dist = learner.net.distribution(torch.zeros(2, 3))
    assert dist.log_std.shape == (2, 2)
    assert torch.allclose(dist.log_std, torch.full((2, 2), -0.5), atol=0.05)  # near-zero initial outputs
    policy.load_weights(learner.weights())
    result = learner.update([unroll_from_policy(policy)])
    assert np.isfinite(result.metrics["loss"])


@pytest.mark.parametrize("name", ["appo", "double_dqn"])
def test_actors_device_names_the_key_when_it_cannot_be_used_and_works_when_it_can(name):
    config = config_from_dict(
        {"algorithm": {"name": name}, "actors": {"device": "cuda"}, "model": {"hidden_sizes": [8]}}
    )
    space = gym.spaces.Discrete(2)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="actors.device: device 'cuda': CUDA is not available"):
            make_policy(config, VECTOR, space, seed=0)
        return
    policy = make_policy(config, VECTOR, space, seed=0)  # on a GPU machine: inference there, arrays back on the host
    actions, extras = policy.explore(np.zeros((4, 3), np.float32), np.zeros(4))
    assert isinstance(actions, np.ndarray) and actions.shape == (4,)
    assert all(isinstance(v, np.ndarray) for v in extras.values())


@pytest.mark.parametrize(
    "options",
    [
        {"targets": "per_update"},
        {"targets": "per_update", "minibatch_by": "steps", "minibatches": 4, "epochs": 2, "value_clip": 0.2},
        {"normalize_returns": True, "minibatches": 2},
        {
            "targets": "per_update",
            "minibatch_by": "steps",
            "minibatches": 4,
            "normalize_returns": True,
            "normalize_obs": True,
        },
    ],
)
def test_every_target_mode_and_normalizer_updates_and_reports_diagnostics(options):
    config, space = appo_config(**options), SPACES["discrete"]
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=5)
    policy.load_weights(learner.weights())
    result = learner.update([unroll_from_policy(policy), unroll_from_policy(policy, steps=6, seed=1)])
    metrics = result.metrics
    for key in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance"):
        assert np.isfinite(metrics[key]), key
    assert metrics["approx_kl"] >= 0.0
    if options.get("normalize_returns"):
        assert metrics["return_std"] > 0.0
    # the weights (normalizer statistics included) cross the wire and load into an actor, a checkpoint into a learner
    blob = WeightBlob.from_frames([bytes(f) for f in WeightBlob.build("default", 1, 1, learner.weights()).to_frames()])
    policy.load_weights(blob.tensors)
    other = make_algorithm(config, VECTOR, space, "cpu")
    other.load_state_dict(learner.state_dict())
    for key, value in learner.weights().items():
        np.testing.assert_array_equal(other.weights()[key], value)


def test_observation_statistics_travel_to_the_actor_and_scale_its_inputs():
    config, space = appo_config(normalize_obs=True), SPACES["discrete"]
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=5)
    batch = unroll_from_policy(policy)
    shifted = dataclasses.replace(batch, obs=batch.obs * 50.0 + 100.0, final_obs=batch.final_obs * 50.0 + 100.0)
    learner.update([shifted])
    weights = learner.weights()
    mean = weights["obs_norm.mean"]
    np.testing.assert_allclose(mean, shifted.obs[:-1].reshape(-1, 3).mean(0), rtol=1e-3)
    policy.load_weights(weights)
    # the actor's distribution equals the learner's on raw observations: both normalize the same way
    obs = shifted.obs[0]
    with torch.no_grad():
        mine = policy.nets.current.distribution(torch.as_tensor(obs)).log_prob(torch.zeros(4, 1, dtype=torch.long))
        theirs = learner.net.distribution(torch.as_tensor(obs)).log_prob(torch.zeros(4, 1, dtype=torch.long))
    torch.testing.assert_close(mine, theirs)
    normalized = learner.net.inputs(torch.as_tensor(obs))
    assert normalized.abs().max() < 5.0  # raw inputs are around 100


def test_image_observations_are_normalized_per_pixel_in_unit_scale_as_sample_factory_does():
    """By default (normalize_images), per pixel after scaling to [0, 1]: mean and variance of what was seen,
    epsilon 1e-5, clipped at 5; the built-in CNN then takes the floats as they are (no second 1/255)."""
    image = gym.spaces.Box(0, 255, (2, 36, 36), np.uint8)
    config = config_from_dict({"algorithm": {"name": "appo"}, "model": {"hidden_sizes": [8]}})
    net = make_algorithm(config, image, gym.spaces.Discrete(2), "cpu").net
    assert net.obs_norm is not None and net.policy.scale is False
    frames = np.zeros((4, 2, 36, 36), np.uint8)
    frames[:, 0, 0, 0] = [0, 51, 102, 153]  # one pixel that varies: 0, 0.2, 0.4, 0.6 in unit scale
    frames[:, 1, 5, 5] = 255  # one that never changes
    net.update_obs_norm(torch.as_tensor(frames), chunk_rows=3)  # chunks fold in as one batch would
    mean, var = 0.3, float(np.var([0.0, 0.2, 0.4, 0.6]))  # the prior's weight (1e-4 of a row) is below tolerance
    assert net.obs_norm.mean[0, 0, 0].item() == pytest.approx(mean, rel=1e-3)
    assert net.obs_norm.var[0, 0, 0].item() == pytest.approx(var, rel=1e-3)
    probe = torch.zeros((1, 2, 36, 36), dtype=torch.uint8)
    probe[0, 0, 0, 0] = 255
    out = net.inputs(probe)
    assert out[0, 0, 0, 0].item() == pytest.approx((1.0 - mean) / math.sqrt(var + 1e-5), rel=1e-3)
    assert out[0, 1, 5, 5].item() == -5.0  # a constant pixel's one change is clipped, not divided by ~0
    assert out[0, 1, 7, 7].item() == 0.0  # background stays 0


def test_images_are_left_alone_when_asked_and_for_a_network_of_ones_own(tmp_path, monkeypatch):
    image = gym.spaces.Box(0, 255, (2, 36, 36), np.uint8)
    off = config_from_dict({"algorithm": {"name": "appo", "normalize_images": False}})
    net = make_algorithm(off, image, gym.spaces.Discrete(2), "cpu").net
    assert net.obs_norm is None and net.policy.scale is True
    (tmp_path / "my_cnn.py").write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self, outputs):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(2 * 36 * 36, outputs)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x.flatten(1).float() / 255.0)\n"
        "def make(obs_space, outputs, model):\n"
        "    return Net(outputs)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    own = config_from_dict({"algorithm": {"name": "appo"}, "model": {"kind": "my_cnn:make"}})
    assert make_algorithm(own, image, gym.spaces.Discrete(2), "cpu").net.obs_norm is None  # raw pixels, as documented
    # vectors: normalize_obs, off by default
    assert (
        make_algorithm(
            config_from_dict({"algorithm": {"name": "appo"}}), VECTOR, gym.spaces.Discrete(2), "cpu"
        ).net.obs_norm
        is None
    )


def test_a_pixel_run_from_before_image_normalization_is_named_on_resume():
    image = gym.spaces.Box(0, 255, (2, 36, 36), np.uint8)
    old = make_algorithm(
        config_from_dict({"algorithm": {"name": "appo", "normalize_images": False}}),
        image,
        gym.spaces.Discrete(2),
        "cpu",
    )
    new = make_algorithm(config_from_dict({"algorithm": {"name": "appo"}}), image, gym.spaces.Discrete(2), "cpu")
    with pytest.raises(ValueError, match=r"algorithm.normalize_images = false; this run has true"):
        new.load_state_dict(old.state_dict())


def test_masked_observations_are_not_normalized():
    config = config_from_dict({"algorithm": {"name": "appo", "normalize_obs": True}, "model": {"hidden_sizes": [8]}})
    assert make_algorithm(config, VECTOR, gym.spaces.Discrete(2), "cpu", mask_size=2).net.obs_norm is None
    assert make_algorithm(config, VECTOR, gym.spaces.Discrete(2), "cpu").net.obs_norm is not None


def test_training_and_checkpoints_never_import_torch_dynamo(tmp_path):
    """torch.optim's constructor imports torch._dynamo (about a second of CPU at every learner start): the
    learners' Adam must not need it, for either algorithm, through updates and a checkpoint round trip."""
    script = f"""
import sys
import gymnasium as gym, numpy as np, torch
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.checkpoints.files import load_latest_checkpoint, save_checkpoint
from tests.daemons.algorithms.test_appo import VECTOR, unroll_from_policy, appo_config
from tandem.daemons.algorithms import make_policy
space = gym.spaces.Discrete(3, start=1)
config = appo_config()
learner = make_algorithm(config, VECTOR, space, "cpu")
policy = make_policy(config, VECTOR, space, seed=0)
policy.load_weights(learner.weights())
learner.update([unroll_from_policy(policy)])
save_checkpoint(__import__("pathlib").Path({str(tmp_path)!r}), {{"algorithm": learner.state_dict(), "version": 1}})
learner.load_state_dict(load_latest_checkpoint(__import__("pathlib").Path({str(tmp_path)!r}))["algorithm"])
dqn = make_algorithm(config_from_dict({{"model": {{"hidden_sizes": [8]}}}}), VECTOR, gym.spaces.Discrete(2), "cpu")
dqn.optimizer.step()
assert "torch._dynamo" not in sys.modules, "torch._dynamo was imported"
print("ok")
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_adam_computes_what_torch_adam_does_and_their_states_load_into_each_other():
    from tandem.daemons.algorithms.adam import Adam

    def net():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))

    for fused in (True, False):
        ours_net, torch_net = net(), net()
        ours = Adam(ours_net.parameters(), lr=1e-2, eps=1e-5, fused=fused)
        reference = torch.optim.Adam(torch_net.parameters(), lr=1e-2, eps=1e-5)
        gen = torch.Generator().manual_seed(1)
        for _ in range(15):
            x = torch.randn(8, 4, generator=gen)
            for model, optimizer in ((ours_net, ours), (torch_net, reference)):
                optimizer.zero_grad()
                model(x).pow(2).sum().backward()
                optimizer.step()
        for a, b in zip(ours_net.parameters(), torch_net.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        resumed = Adam(net().parameters(), lr=1e-2, eps=1e-5)
        resumed.load_state_dict(reference.state_dict())  # a checkpoint written by torch.optim.Adam
        assert resumed.steps == 15
        torch.testing.assert_close(
            resumed.exp_avg_sq[0], reference.state[list(torch_net.parameters())[0]]["exp_avg_sq"]
        )
        torch.optim.Adam(net().parameters(), lr=1e-2).load_state_dict(ours.state_dict())  # and the other way
    with pytest.raises(ValueError, match="optimizer state is for 4 parameters, this network has 2"):
        Adam(torch.nn.Linear(3, 3).parameters(), lr=1e-3).load_state_dict(reference.state_dict())


def test_return_statistics_are_checkpointed_and_a_checkpoint_without_them_still_resumes(caplog):
    space = SPACES["discrete"]
    trained = make_algorithm(appo_config(), VECTOR, space, "cpu")
    policy = make_policy(appo_config(), VECTOR, space, seed=0)
    policy.load_weights(trained.weights())
    trained.update([unroll_from_policy(policy)])
    assert not any(k.startswith("value_norm") for k in trained.weights())  # the actors never need them
    resumed = make_algorithm(appo_config(), VECTOR, space, "cpu")
    resumed.load_state_dict(trained.state_dict())
    torch.testing.assert_close(resumed.value_norm.var, trained.value_norm.var)
    assert trained.value_norm.count.item() > 1  # the update's targets were counted
    old = make_algorithm(appo_config(normalize_returns=False), VECTOR, space, "cpu")
    with caplog.at_level("WARNING"):
        resumed.load_state_dict(old.state_dict())  # the same network: it loads, and says what it did
    assert "start afresh" in caplog.text and resumed.value_norm.count.item() < 1
    with pytest.raises(ValueError, match=r"algorithm.normalize_obs = false; this run has true"):
        make_algorithm(appo_config(normalize_obs=True), VECTOR, space, "cpu").load_state_dict(old.state_dict())


def test_a_long_update_reports_progress_after_every_minibatch_step():
    """The learner heartbeats through `progress` during an update (a CNN's epochs take seconds on a busy CPU)."""
    config, space = appo_config(epochs=3, minibatches=2, targets="per_update"), SPACES["discrete"]
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=5)
    calls = []
    learner.progress = lambda: calls.append(1)
    learner.update([unroll_from_policy(policy)])
    assert len(calls) == 6


@pytest.mark.parametrize("kind", sorted(SPACES))
@pytest.mark.parametrize("state_dependent", [False, True])
def test_the_greedy_shortcut_gives_the_distributions_mode(kind, state_dependent):
    """The evaluator's greedy step skips the distribution; it must pick what the distribution's mode picks."""
    space = SPACES[kind]
    config = appo_config(state_dependent_std=state_dependent, shared_torso=state_dependent)
    policy = make_policy(config, VECTOR, space, seed=2)
    obs = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    net = policy.nets.current
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for layer in net.modules():  # larger outputs than the 0.01-gain start, so the modes differ across rows
            if isinstance(layer, torch.nn.Linear):
                layer.weight.normal_(0.0, 1.0, generator=gen)
                layer.bias.normal_(0.0, 1.0, generator=gen)
        x = torch.as_tensor(obs)
        expected = net.head.to_wire(net.distribution(x).mode()).numpy()
    if kind == "box":  # means: a small batch is computed in numpy (numpy_acting.py), float32 sums in its order
        np.testing.assert_allclose(policy.act(obs, np.zeros(64)), expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(policy.act(obs, np.zeros(64)), expected)
    assert kind == "box" or len(np.unique(expected.reshape(64, -1), axis=0)) > 1


def test_the_greedy_shortcut_never_picks_a_masked_action():
    space = gym.spaces.Discrete(4)
    config = appo_config()
    policy = make_policy(config, gym.spaces.Box(-1.0, 1.0, (7,), np.float32), space, seed=2, mask_size=4)
    obs = np.random.default_rng(1).uniform(-1, 1, (50, 7)).astype(np.float32)
    obs[:, 3:] = 0.0
    obs[:, 3 + 2] = 1.0  # only action 2 is legal
    assert (policy.act(obs, np.zeros(50)) == 2).all()


def test_the_learning_rate_decays_linearly_by_the_steps_trained_and_resumes_where_it_was():
    # batch_size 32 (the unrolls below are 8 x 4): 4 updates take the rate from 1e-3 to 0
    config, space = appo_config(learning_rate=1e-3, batch_size=32, learning_rate_decay_steps=128), SPACES["discrete"]
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=0)
    rates = [learner.update([unroll_from_policy(policy, seed=i)]).metrics["learning_rate"] for i in range(5)]
    assert rates == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0])
    resumed = make_algorithm(config, VECTOR, space, "cpu")
    learner.updates = 2  # as if saved after two updates
    resumed.load_state_dict(learner.state_dict())
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(5e-4)
    constant = make_algorithm(appo_config(learning_rate=1e-3), VECTOR, space, "cpu")
    assert "learning_rate" not in constant.update([unroll_from_policy(policy)]).metrics
    assert constant.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)


def test_the_entropy_bonus_decays_linearly_by_the_steps_trained_and_the_loss_uses_the_decayed_weight():
    space = SPACES["discrete"]
    config = appo_config(batch_size=32, entropy_coef=1.0, entropy_decay_steps=64)  # 2 updates of 32 steps to 0
    learner, policy = make_algorithm(config, VECTOR, space, "cpu"), make_policy(config, VECTOR, space, seed=0)
    unroll = unroll_from_policy(policy, seed=7)

    def next_update_trains_as(coef: float, other: float) -> bool:
        """The learner's next update moves its weights as a constant `coef` does, and not as `other` does."""
        after = {}
        for c in (coef, other):
            twin = make_algorithm(appo_config(batch_size=32, entropy_coef=c), VECTOR, space, "cpu")
            twin.load_state_dict(learner.state_dict())
            twin.update([unroll])
            after[c] = twin.weights()
        learner.update([unroll])
        mine = learner.weights()

        def gap(w):  # float sums in another order differ by ~1e-10; the bonus moves weights by ~1e-6
            return max(float(np.abs(mine[k] - w[k]).max()) for k in mine)

        return gap(after[coef]) < 1e-8 < 1e-7 < gap(after[other])

    assert learner.update([unroll_from_policy(policy, seed=1)]).metrics["entropy_coef"] == pytest.approx(1.0)
    assert next_update_trains_as(0.5, 1.0)  # the second update: halfway
    assert next_update_trains_as(0.0, 0.5)  # past the decay: no bonus at all
    assert learner.update([unroll]).metrics["entropy_coef"] == 0.0
    constant = make_algorithm(appo_config(entropy_coef=0.01), VECTOR, space, "cpu")
    assert "entropy_coef" not in constant.update([unroll]).metrics
