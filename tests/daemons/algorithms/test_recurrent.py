"""Recurrent cores (model.core): the state actors carry is the state the learner runs the core from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP, stack_unrolls
from tandem.daemons.config import ConfigError, load_config
from tandem.daemons.serial.parts import SerialActor, SerialEvaluator
from tandem.protocol import ProtocolError, TransitionBatch, framing
from tandem.protocol.joining import join_unrolls
from tests.daemons.unrolls import collect, wire
from tests.protocol.samples import unchecked_frames

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIG = EXAMPLES / "cartpole_lstm.toml"
STEPS, ENVS = 8, 3


pytestmark = pytest.mark.usefixtures("examples_on_path")  # the examples' env modules import


def recurrent_config(tmp_path, core="lstm", *more):
    # episodes of at most 11 steps: terminations and truncations fall inside unrolls of 8
    return load_config(
        CONFIG,
        [f"run.dir='{tmp_path}'", f"model.core='{core}'", "model.core_size=16", f"env.num_envs={ENVS}"]
        + [f"actors.unroll_length={STEPS}", "env.max_episode_steps=11", *more],
    )


def learner_logp(algorithm, unrolls: list[TransitionBatch]) -> np.ndarray:
    """log pi(a|x) [T, K] the learner computes for the unrolls side by side, from their initial states."""
    d = stack_unrolls(unrolls, algorithm.net.head, algorithm.device, 1.0)
    with torch.no_grad():
        _, logp, values = algorithm.evaluate_unrolls(d)
    steps, n = d.rewards.shape
    assert values.shape[0] == (steps + 1) * n + d.finals.shape[0]  # a value for every row and final observation
    return logp.numpy()


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_the_learner_recomputes_what_the_actor_acted_with_whole_or_split(tmp_path, core):
    config = recurrent_config(tmp_path, core)
    algorithm = sharp_learner(config)
    unrolls = collect(config, 4, algorithm.weights())
    logp = np.concatenate([u.extras[BEHAVIOUR_LOGP] for u in unrolls])
    assert logp.std() > 0.1  # the actions' probabilities vary with the state: the comparisons below mean something
    ends = np.concatenate([u.terminated | u.truncated for u in unrolls])
    assert ends[:-1].any() and any(u.truncated.any() for u in unrolls)  # episode starts inside unrolls
    assert not np.any(unrolls[0].core_state)  # a fresh actor starts from zeros
    assert all(np.any(u.core_state) for u in unrolls[1:])  # later ones carry the state on
    # the actor acted with the learner's weights, so the log-probs must agree
    for u in unrolls:
        np.testing.assert_allclose(learner_logp(algorithm, [u]), u.extras[BEHAVIOUR_LOGP], atol=2e-5)
    whole = learner_logp(algorithm, [join_unrolls(unrolls)])
    split = np.concatenate([learner_logp(algorithm, [u]) for u in unrolls])
    np.testing.assert_allclose(whole, split, atol=2e-5)
    # split at any point: the state at the split is the one the actor carried there
    for cut in range(1, len(unrolls)):
        first, second = join_unrolls(unrolls[:cut]), join_unrolls(unrolls[cut:])
        again = np.concatenate([learner_logp(algorithm, [first]), learner_logp(algorithm, [second])])
        np.testing.assert_allclose(again, whole, atol=2e-5)


def sharp_learner(config):
    """A learner whose policy depends strongly on the core's output (a fresh one is near-uniform by design)."""
    algorithm = make_algorithm(config, *unrolls_spaces(config), "cpu", mask_size=0)
    with torch.no_grad():
        algorithm.net.policy_head.weight.mul_(1000.0)
    return algorithm


def unrolls_spaces(config):
    actor = SerialActor(config)
    try:
        return actor.spaces.observation_space, actor.spaces.action_space
    finally:
        actor.close()


def test_the_state_matters_to_the_learner(tmp_path):
    """A wrong initial state gives other log-probs: the learner really starts from the state it is sent."""
    config = recurrent_config(tmp_path)
    algorithm = sharp_learner(config)
    later = collect(config, 2, algorithm.weights())[1]
    np.testing.assert_allclose(learner_logp(algorithm, [later])[0], later.extras[BEHAVIOUR_LOGP][0], atol=2e-5)
    zeroed = dataclasses.replace(later, core_state=np.zeros_like(later.core_state))
    assert not np.allclose(learner_logp(algorithm, [zeroed])[0], later.extras[BEHAVIOUR_LOGP][0], atol=1e-2)


def test_an_update_trains_the_core_and_keeps_weights_finite(tmp_path):
    config = recurrent_config(tmp_path, "lstm", "algorithm.minibatches=3", "algorithm.epochs=2")
    unrolls = collect(config, 2)
    algorithm = make_algorithm(config, *unrolls_spaces(config), "cpu", mask_size=0)
    before = {k: v.copy() for k, v in algorithm.weights().items()}
    for targets in ("per_update", "per_minibatch"):
        algorithm.cfg.targets = targets
        metrics = algorithm.update(unrolls).metrics
        assert np.isfinite(metrics["loss"]) and metrics["entropy"] > 0
    after = algorithm.weights()
    assert not np.array_equal(before["core.weight_hh"], after["core.weight_hh"])  # the gradient reached the core
    assert all(np.isfinite(v).all() for v in after.values())


def test_the_core_state_travels_bit_exact_and_bad_ones_are_refused_by_name(tmp_path):
    batch = collect(recurrent_config(tmp_path), 2)[1]
    again = wire(batch)
    assert again.core_state.tobytes() == batch.core_state.tobytes() and again.core_state.dtype == np.float32
    plain = dataclasses.replace(batch, core_state=None)
    assert wire(plain).core_state is None
    bad = {
        "float64": batch.core_state.astype(np.float64),
        "one env short": batch.core_state[:-1],
        "three dimensions": batch.core_state[:, :, None],
        "NaN": np.where(np.arange(batch.core_state.shape[1]) == 3, np.nan, batch.core_state).astype(np.float32),
    }
    for what, state in bad.items():
        with pytest.raises(ProtocolError, match="core_state"):
            dataclasses.replace(batch, core_state=state).check_shapes()
            pytest.fail(f"a {what} state passed")


def test_a_learner_refuses_a_state_that_does_not_fit_its_core(tmp_path):
    config = recurrent_config(tmp_path)
    batch = collect(config, 1)[0]
    algorithm = make_algorithm(config, *unrolls_spaces(config), "cpu", mask_size=0)
    algorithm.check_batch(batch)
    with pytest.raises(ValueError, match="core_state is missing"):
        algorithm.check_batch(dataclasses.replace(batch, core_state=None))
    with pytest.raises(ValueError, match=r"core_state must be float32 \[K=3, 32\]"):
        algorithm.check_batch(dataclasses.replace(batch, core_state=np.zeros((ENVS, 8), np.float32)))
    feed_forward = recurrent_config(tmp_path, "none")
    plain = make_algorithm(feed_forward, *unrolls_spaces(feed_forward), "cpu", mask_size=0)
    with pytest.raises(ValueError, match="feed-forward"):
        plain.check_batch(batch)


def test_a_feed_forward_actor_sends_no_state(tmp_path):
    batch = collect(recurrent_config(tmp_path, "none"), 1)[0]
    assert batch.core_state is None
    header, _ = framing.decode_header(batch.to_frames())
    assert "core_state" not in {a["name"] for a in header["arrays"]}


def test_the_evaluator_carries_a_state_per_env_and_resets_it(tmp_path):
    """Greedy rounds with a recurrent policy run, and give the same returns twice (the state starts fresh)."""
    config = recurrent_config(tmp_path, "lstm", "eval.num_envs=3", "eval.window_episodes=5")
    evaluator = SerialEvaluator(config)
    try:
        actor_weights = make_algorithm(config, *unrolls_spaces(config), "cpu", mask_size=0).weights()
        first = evaluator.evaluate(0, actor_weights)
        evaluator.played = 0
        second = evaluator.evaluate(0, actor_weights)
        assert first == second and first["eval_return"] > 0
    finally:
        evaluator.close()


@pytest.mark.parametrize(
    "override, key",
    [
        (["algorithm.name='double_dqn'"], "model.core"),
        (["algorithm.minibatch_by='steps'"], "algorithm.minibatch_by"),
        (["algorithm.name='sac'"], "model.core"),
    ],
)
def test_a_core_the_run_cannot_train_is_refused_by_its_key(tmp_path, override, key):
    with pytest.raises(ConfigError, match=key):
        load_config(CONFIG, [f"run.dir='{tmp_path}'", *override])


@pytest.fixture
def recurrent_learner(tmp_path, built_learner):
    return built_learner(recurrent_config(tmp_path, "lstm", f"algorithm.batch_size={STEPS * ENVS}"))


def nan_state(state: np.ndarray) -> np.ndarray:
    bad = state.copy()
    bad[1, 5] = np.nan
    return bad


BAD_STATES = {  # what is wrong -> (the batch's core_state, the reason it is counted under)
    "missing": (lambda s: None, "algorithm"),
    "of another width": (lambda s: np.zeros((ENVS, 8), np.float32), "algorithm"),
    "float64": (lambda s: s.astype(np.float64), "frames"),
    "one env short": (lambda s: s[:-1].copy(), "frames"),
    "NaN": (nan_state, "frames"),
}


@pytest.mark.parametrize("what", list(BAD_STATES))
def test_a_batch_with_a_bad_state_is_counted_by_reason_dropped_and_the_learner_goes_on(recurrent_learner, what):
    learner = recurrent_learner
    good = [dataclasses.replace(u, policy_version=0) for u in collect(learner.config, 2)]
    make, reason = BAD_STATES[what]
    learner.intake.handle(frames(dataclasses.replace(good[1], core_state=make(good[1].core_state))))
    counts = learner.progress.counts
    assert counts["batches_malformed"] == 1 and counts[f"malformed_{reason}"] == 1
    assert counts["transitions_inserted"] == 0
    learner.intake.handle(frames(good[0]))
    assert counts["transitions_inserted"] == STEPS * ENVS
    assert learner.train_step() and np.isfinite(learner.training.last_metrics["loss"])


frames = unchecked_frames  # the bytes a sender would send (framing checks run on the way in, not out)


def test_each_agent_of_a_pettingzoo_world_carries_its_own_state_to_its_policy_learner(tmp_path):
    """Two recurrent policies in one world: every agent stream's unrolls start from the state it reached, so each
    learner recomputes what its agents acted with, episode ends (MPE's 25-cycle cut) inside unrolls included."""
    from tandem.daemons.acting.stepping import actor_envs, make_stepping
    from tandem.daemons.algorithms import make_policy
    from tandem.daemons.algorithms.base import explore_with
    from tandem.daemons.config.policies import policy_config

    config = load_config(
        EXAMPLES / "speaker_listener.toml",
        [f"run.dir='{tmp_path}'", "algorithm.name='appo'", "algorithm.minibatch_by='unrolls'", "model.core='gru'"]
        + ["model.core_size=8", f"actors.unroll_length={STEPS}", "env.num_envs=2"],
    )
    api, build = actor_envs(config, 5)
    stepping = make_stepping(build(lambda stage: None), api, config, "actor-0", 5, incarnation=0)
    try:
        learners, policies = {}, {}
        for name, spaces in stepping.spaces.items():
            pconf = policy_config(config, name)
            learners[name] = make_algorithm(pconf, spaces.observation_space, spaces.action_space, "cpu", 0)
            with torch.no_grad():
                learners[name].net.policy_head.weight.mul_(300.0)
            policies[name] = make_policy(pconf, spaces.observation_space, spaces.action_space, 3, 0)
            policies[name].load_weights(learners[name].weights())

        def choose(policy, obs, env_index, state=None):
            return explore_with(policies[policy], obs, np.zeros(len(obs)), state)

        while len(stepping.outbox) < 16:
            stepping.tick(choose, {name: 0 for name in policies})
        batches = list(stepping.outbox)
    finally:
        stepping.close()
    assert {b.policy_id for b in batches} == set(policies)
    assert any(b.truncated.any() for b in batches) and any(np.any(b.core_state) for b in batches)
    for batch in batches:
        np.testing.assert_allclose(
            learner_logp(learners[batch.policy_id], [batch]), batch.extras[BEHAVIOUR_LOGP], atol=5e-5
        )
