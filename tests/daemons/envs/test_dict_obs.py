"""Dict observations (MiniGrid's view and direction): one wire array per key, checked per key, an encoder per key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from tandem import load_exported, load_policy
from tandem.client.api.export import export_policy
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP, stack_unrolls
from tandem.daemons.checkpoints.files import save_checkpoint
from tandem.daemons.config import load_config, render_toml
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.serial.parts import SerialEvaluator
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol import ProtocolError, TransitionBatch, framing
from tests.daemons.unrolls import collect, wire
from tests.protocol.samples import unchecked_frames

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIG = EXAMPLES / "minigrid_doorkey.toml"
STEPS, ENVS = 16, 3


pytestmark = pytest.mark.usefixtures("examples_on_path")  # the examples' env modules import


def doorkey_config(tmp_path, *more):
    return load_config(
        CONFIG,
        [f"run.dir='{tmp_path}'", f"env.num_envs={ENVS}", f"actors.unroll_length={STEPS}"]
        + ["env.max_episode_steps=10", f"algorithm.batch_size={STEPS * ENVS}", *more],
    )


def learner_of(config):
    spaces = probe_policy_spaces(config)
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    with torch.no_grad():  # a policy that depends strongly on what it sees (a fresh one is near-uniform)
        head = algorithm.net.policy_head if algorithm.net.recurrent else algorithm.net.policy.head[-1]
        head.weight.mul_(1000.0)
    return algorithm


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_an_actor_sends_each_key_alone_and_the_learner_recomputes_what_it_acted_with(tmp_path, core):
    config = doorkey_config(tmp_path, f"model.core='{core}'", "algorithm.minibatch_by='unrolls'")
    algorithm = learner_of(config)
    unrolls = [wire(u) for u in collect(config, 3, algorithm.weights())]
    first = unrolls[0]
    assert first.keyed and sorted(first.obs) == ["direction", "image"]
    assert first.obs["image"].shape == (STEPS + 1, ENVS, 7, 7, 3) and first.obs["image"].dtype == np.uint8
    assert first.obs["direction"].shape == (STEPS + 1, ENVS) and first.obs["direction"].dtype == np.int64
    assert any(u.truncated.any() for u in unrolls)  # episodes of 10 steps: final observations per key too
    assert all(u.final_obs["image"].shape[0] == u.truncated.sum() for u in unrolls)
    logp = np.concatenate([u.extras[BEHAVIOUR_LOGP] for u in unrolls])
    assert logp.std() > 0.05  # the policy's choices depend on the view: the comparison below means something
    for u in unrolls:
        d = stack_unrolls([u], algorithm.net.head, algorithm.device, 1.0)
        with torch.no_grad():
            _, learner_logp, _ = algorithm.evaluate_unrolls(d)
        np.testing.assert_allclose(learner_logp.numpy(), u.extras[BEHAVIOUR_LOGP], atol=5e-5)
    metrics = algorithm.update(unrolls).metrics
    assert np.isfinite(metrics["loss"])


def test_a_dict_batch_round_trips_bit_exact_and_framing_names_the_bad_key(tmp_path):
    config = doorkey_config(tmp_path)
    batch = collect(config, 1, learner_of(config).weights())[0]
    again = wire(batch)
    for key in batch.obs:
        assert again.obs[key].tobytes() == batch.obs[key].tobytes() and again.obs[key].dtype == batch.obs[key].dtype
        assert again.final_obs[key].tobytes() == batch.final_obs[key].tobytes()
    names = {a["name"] for a in framing.decode_header(batch.to_frames())[0]["arrays"]}
    assert {"obs.image", "obs.direction", "final_obs.image", "final_obs.direction"} <= names and "obs" not in names
    short = dict(batch.obs, image=batch.obs["image"][:, :-1])  # one env short in one key
    with pytest.raises(ProtocolError, match="obs.image"):
        dataclasses.replace(batch, obs=short).check_shapes()
    no_final = {k: v for k, v in batch.final_obs.items() if k != "direction"}
    with pytest.raises(ProtocolError, match="final_obs"):
        dataclasses.replace(batch, final_obs=no_final).check_shapes()


@pytest.fixture
def dict_learner(tmp_path, built_learner):
    return built_learner(doorkey_config(tmp_path))


frames = unchecked_frames  # the bytes a sender would send, whatever their keys (checks run on the way in)


def with_keys(batch: TransitionBatch, change) -> TransitionBatch:
    obs, final = dict(batch.obs), dict(batch.final_obs)
    change(obs, final)
    return dataclasses.replace(batch, obs=obs, final_obs=final)


def nan_key(obs, final):
    obs["direction"] = obs["direction"].astype(np.float32)
    final["direction"] = final["direction"].astype(np.float32)
    obs["direction"][2, 1] = np.nan


BAD_KEYS = {  # what is wrong -> (how, the reason it is counted under)
    "a key missing": (lambda o, f: (o.pop("direction"), f.pop("direction")), "obs_shape"),
    "an extra key": (lambda o, f: (o.update(extra=o["direction"]), f.update(extra=f["direction"])), "obs_shape"),
    "a key of another shape": (
        lambda o, f: (o.update(image=o["image"][..., :2].copy()), f.update(image=f["image"][..., :2].copy())),
        "obs_shape",
    ),
    "a key of another dtype": (
        lambda o, f: (o.update(image=o["image"].astype(np.float32)), f.update(image=f["image"].astype(np.float32))),
        "obs_dtype",
    ),
    "one array for a Dict policy": (None, "obs_shape"),
}


@pytest.mark.parametrize("what", list(BAD_KEYS))
def test_a_batch_with_a_bad_key_is_counted_by_reason_dropped_and_the_learner_goes_on(dict_learner, what):
    learner = dict_learner
    good = [dataclasses.replace(u, policy_version=0) for u in collect(learner.config, 2, None)]
    change, reason = BAD_KEYS[what]
    if change is None:
        bad = dataclasses.replace(good[1], obs=good[1].obs["image"], final_obs=good[1].final_obs["image"])
    else:
        bad = with_keys(good[1], change)
    learner.intake.handle(frames(bad))
    counts = learner.progress.counts
    assert counts["batches_malformed"] == 1 and counts[f"malformed_{reason}"] == 1, counts
    assert counts["transitions_inserted"] == 0
    learner.intake.handle(frames(good[0]))
    assert counts["transitions_inserted"] == STEPS * ENVS
    assert learner.train_step() and np.isfinite(learner.training.last_metrics["loss"])


def test_a_float_key_with_nan_is_counted_as_values(tmp_path):
    """(MiniGrid has no float key: a float key's NaN is checked with the content check alone.)"""
    import gymnasium as gym

    from tandem.daemons.learner.content import BatchContentCheck
    from tandem.daemons.learner.intake import BadBatch

    space = gym.spaces.Dict(
        {"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "direction": gym.spaces.Box(-1, 1, (1,))}
    )
    check = BatchContentCheck.of_space(space, lambda batch: None)
    config = doorkey_config(tmp_path)
    batch = collect(config, 1, None)[0]
    obs = {"image": batch.obs["image"], "direction": np.zeros((STEPS + 1, ENVS, 1), np.float32)}
    final = {"image": batch.final_obs["image"], "direction": np.zeros((len(batch.final_obs["image"]), 1), np.float32)}
    check(dataclasses.replace(batch, obs=obs, final_obs=final))
    obs["direction"][3, 0, 0] = np.nan
    with pytest.raises(BadBatch) as caught:
        check(dataclasses.replace(batch, obs=obs, final_obs=final))
    assert caught.value.reason == "values" and "obs.direction" in str(caught.value)


def test_the_evaluator_plays_dict_observations(tmp_path):
    config = doorkey_config(tmp_path, "eval.num_envs=2", "eval.window_episodes=3")
    evaluator = SerialEvaluator(config)
    try:
        counters = evaluator.evaluate(0, learner_of(config).weights())
        assert 0.0 <= counters["eval_return"] <= 1.0
    finally:
        evaluator.close()


def test_an_off_policy_algorithm_refuses_a_dict_observation_by_name(tmp_path):
    config = doorkey_config(tmp_path, "algorithm.name='double_dqn'")
    spaces = probe_policy_spaces(config)
    with pytest.raises(SetupError, match="observes a Dict .*appo, impala"):
        make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")


def test_a_dict_policy_loads_acts_on_the_envs_dict_and_exports(tmp_path):
    run = tmp_path / "run"
    config = doorkey_config(run)
    run.mkdir()
    (run / "config.toml").write_text(render_toml(config))
    algorithm = learner_of(config)
    save_checkpoint(run / "learner-default", {"algorithm": algorithm.state_dict(), "version": 3, "updates": 1})
    policy = load_policy(run)
    import minigrid_dict

    env = minigrid_dict.make()
    observations = []
    obs, _ = env.reset(seed=1)
    for _ in range(12):
        observations.append(obs)
        obs, *_ = env.step(int(policy.act(obs)))
    one_by_one = np.array([policy.act(o) for o in observations])
    np.testing.assert_array_equal(policy.act(observations), one_by_one)  # a list of the env's dicts: a batch
    exported = load_exported(export_policy(policy, tmp_path / "out").parent)
    assert exported.observation_space == policy.observation_space
    np.testing.assert_array_equal([exported.act(o) for o in observations], one_by_one)
    env.close()


def test_a_vector_env_refuses_a_dict_observation_by_name(tmp_path):
    from tandem.daemons.acting.stepping import actor_envs, make_stepping
    from tandem.daemons.envs.gym_envs import EnvSetupError, close_all

    config = doorkey_config(tmp_path, "env.vector='sync'")
    api, build = actor_envs(config, 0)
    envs = build(lambda stage: None)
    try:
        with pytest.raises(EnvSetupError, match="observes a Dict .*env.vector = ''"):
            make_stepping(envs, api, config, "actor-0", 0, incarnation=0)
    finally:
        close_all(envs)


class PairObservation:
    """A Tuple observation (a vector and a Discrete), as an env of the user's might make it."""

    @staticmethod
    def make(**kwargs):
        import gymnasium as gym

        class Pair(gym.ObservationWrapper):
            def __init__(self, env):
                super().__init__(env)
                self.observation_space = gym.spaces.Tuple(
                    (gym.spaces.Box(-5, 5, (2,), np.float32), gym.spaces.Discrete(2))
                )

            def observation(self, obs):
                return (np.asarray(obs[[0, 2]], np.float32), int(obs[2] > 0))

        return Pair(gym.make("CartPole-v1", **kwargs))


def test_a_tuple_observation_travels_as_keys_by_position_and_trains(tmp_path):
    config = load_config(
        EXAMPLES / "cartpole_appo.toml",
        [f"run.dir='{tmp_path}'", "env.id='tests.daemons.envs.test_dict_obs:PairObservation.make'", "env.num_envs=3"]
        + [f"actors.unroll_length={STEPS}", f"algorithm.batch_size={STEPS * 3}"],
    )
    spaces = probe_policy_spaces(config)
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    batch = wire(collect(config, 1, algorithm.weights())[0])
    assert sorted(batch.obs) == ["0", "1"] and batch.obs["1"].dtype == np.int64
    assert batch.obs["0"].shape == (STEPS + 1, 3, 2)
    assert np.isfinite(algorithm.update([batch]).metrics["loss"])
    from tandem.client.api.space_json import space_from_json, space_to_json

    assert space_from_json(space_to_json(spaces.observation_space)) == spaces.observation_space
