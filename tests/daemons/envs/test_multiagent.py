"""Multi-agent worlds in process: policy assignment, spaces, and the per-agent unrolls an actor sends."""

from __future__ import annotations

import numpy as np
import pytest

from tandem.daemons.config import ConfigError, config_from_dict
from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.rollout import MultiAgentRollout
from tandem.daemons.envs.spaces import ObsAdapter, policy_spaces
from tandem.daemons.envs.worlds import env_api, make_world
from tandem.daemons.settings.agents import assign_agents
from tests.multiagent_envs import AGENTS, INDEX

POLICIES = {"alpha": {"agents": ["a_*"]}, "beta": {"agents": ["b_0"], "algorithm": {"learning_rate": 5e-4}}}


def turn_config(api: str, **env):
    return config_from_dict({"env": {"id": f"tests.multiagent_envs:turn_{api}", "kwargs": env}, "policies": POLICIES})


def rollout_batches(api: str, ticks: int, worlds: int = 3, unroll: int = 4, **env):
    config = turn_config(api, **env)
    envs = [make_world(config.env, env_api(config.env)) for _ in range(worlds)]
    spaces = policy_spaces(config, envs[0])
    rollout = MultiAgentRollout(envs, api, spaces, unroll, "actor-7", seed=0, incarnation=11)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(ticks):
        rollout.tick(
            lambda policy, obs, w: (
                rng.integers(0, 2, size=len(obs)),
                {"logp": -np.arange(len(obs), dtype=np.float32) - 0.5},
            ),
            {"alpha": 5, "beta": 9},
        )
        batches += rollout.outbox
        rollout.outbox.clear()
    return rollout, batches


def test_per_step_extras_travel_with_each_stream_unroll():
    _, batches = rollout_batches("parallel", ticks=40)
    assert batches
    for b in batches:
        logp = b.extras["logp"]
        assert logp.shape == (4, 1) and logp.dtype == np.float32
        assert np.all(logp <= -0.5) and np.all(logp == np.round(logp - 0.5) + 0.5)


def test_policies_map_agents_by_pattern_and_merge_their_overrides():
    config = turn_config("aec")
    assert assign_agents(config, list(AGENTS)) == {"a_0": "alpha", "a_1": "alpha", "b_0": "beta"}
    assert policy_config(config, "beta").algorithm.learning_rate == 5e-4
    assert policy_config(config, "alpha").algorithm.learning_rate == config.algorithm.learning_rate
    with pytest.raises(ConfigError, match="no policy plays agent 'b_0'"):
        assign_agents(config_from_dict({"policies": {"alpha": {"agents": ["a_*"]}}}), list(AGENTS))
    with pytest.raises(ConfigError, match="policies.beta.learner.replay_capcity: unknown key"):
        config_from_dict({"policies": {"beta": {"learner": {"replay_capcity": 5}}}})


def test_a_policy_that_plays_no_agent_is_named():
    config = config_from_dict(
        {"env": {"id": "tests.multiagent_envs:turn_aec"}, "policies": {**POLICIES, "gamma": {"agents": ["c_*"]}}}
    )
    with pytest.raises(ValueError, match="policy 'gamma' plays none of the env's agents"):
        policy_spaces(config, make_world(config.env, "aec"))


@pytest.mark.parametrize("api", ["aec", "parallel"])
def test_each_policy_gets_only_its_agents_in_turn_order(api):
    rollout, batches = rollout_batches(api, ticks=400)
    assert {b.policy_id for b in batches} == {"alpha", "beta"}
    seqs: dict[str, list[int]] = {}
    for b in batches:
        agent = b.actor_id.rsplit("/", 1)[1]
        assert b.actor_id.startswith("actor-7/") and b.incarnation == 11 and b.num_envs == 1
        assert b.policy_id == ("beta" if agent == "b_0" else "alpha"), (b.policy_id, b.actor_id)
        assert b.policy_version == (9 if agent == "b_0" else 5)
        obs = b.obs[:, 0]
        assert np.all(obs[:, 0] == INDEX[agent]), "a stream holds another agent's observations"
        ended = b.terminated[:, 0] | b.truncated[:, 0]
        for t in range(b.num_steps):
            if ended[t]:  # the next observation is this agent's first of a later episode
                assert obs[t + 1, 2] > obs[t, 2] and obs[t + 1, 3] == 0
            else:  # the agent's own next turn in the same episode
                assert obs[t + 1, 2] == obs[t, 2] and obs[t + 1, 3] == obs[t, 3] + 1
                assert obs[t + 1, 1] > obs[t, 1], "turn order went backwards"
        np.testing.assert_array_equal(b.rewards[:, 0], b.actions[:, 0].astype(np.float32))
        # Only a_1 leaves mid-episode; the others are only ever truncated, each with its final observation.
        assert not b.terminated.any() or agent == "a_1"
        finals = b.final_obs
        assert len(finals) == int(b.truncated.sum())
        if len(finals):
            steps = np.flatnonzero(b.truncated[:, 0])
            assert np.all(finals[:, 2] == obs[steps, 2]) and np.all(finals[:, 3] == obs[steps, 3] + 1)
        seqs.setdefault(b.actor_id, []).append(b.seq)
    assert len(seqs) == 3 * len(AGENTS)  # every (world, agent) stream sent batches
    for stream, seq in seqs.items():
        assert seq == list(range(len(seq))), f"{stream} skipped or repeated a seq"
    returns = rollout.recent_returns()
    assert set(returns) == set(AGENTS)


def test_a_leaving_agent_does_not_cut_the_others_episodes():
    rollout, _ = rollout_batches("aec", ticks=300, cycles=12, leave_at=3)
    lengths = {}
    for agent, _, length in rollout.finished:
        lengths.setdefault(agent, set()).add(length)
    assert lengths["a_1"] == {3}  # leaves at its third turn
    # 12 world turns: a_1 takes 3, and a_0 and b_0 share the other 9 (a_0 moves first).
    assert lengths["a_0"] == {5} and lengths["b_0"] == {4}


def test_action_mask_observations_are_flattened_with_the_mask_last():
    import gymnasium as gym

    space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(0, 1, (3, 3, 2), np.int8), "action_mask": gym.spaces.Box(0, 1, (9,), np.int8)}
    )
    adapter = ObsAdapter(space, "agent 'x'")
    obs = {"observation": np.ones((3, 3, 2), np.int8), "action_mask": np.eye(9, dtype=np.int8)[4]}
    flat = adapter(obs)
    assert adapter.mask_size == 9 and flat.shape == (27,) and flat.dtype == np.float32
    np.testing.assert_array_equal(flat[-9:], np.eye(9)[4])
    with pytest.raises(ValueError, match="not supported"):
        ObsAdapter(gym.spaces.Discrete(4), "agent 'x'")


def test_masked_policy_explores_and_exploits_only_legal_actions():
    import gymnasium as gym

    from tandem.daemons.algorithms.dqn.learner import DQNPolicy

    config = config_from_dict({})
    policy = DQNPolicy(config, gym.spaces.Box(-1, 1, (13,), np.float32), gym.spaces.Discrete(4), seed=0, mask_size=4)
    obs = np.zeros((200, 13), np.float32)
    obs[:, -4:] = [0, 1, 0, 1]
    for eps in (0.0, 1.0):
        actions = policy.act(obs, np.full(200, eps))
        assert set(actions.tolist()) <= {1, 3}
    assert set(policy.act(obs, np.ones(200)).tolist()) == {1, 3}


def test_the_api_is_found_without_building_an_env_and_an_unforeseen_one_names_env_api():
    from tandem.daemons.envs.gym_envs import EnvBuildError, make_env

    def api(env_id: str, **extra) -> str:
        return env_api(config_from_dict({"env": {"id": env_id, **extra}, "policies": POLICIES}).env)

    assert api("tests.multiagent_envs:TurnAEC") == "aec"  # a class
    assert api("tests.multiagent_envs:turn_parallel") == "parallel"  # an annotated factory
    assert api("CartPole-v1") == "gymnasium"
    # A factory that says nothing is taken for gymnasium; building it then names the setting to use.
    assert api("tests.multiagent_envs:unannotated_aec") == "gymnasium"
    assert api("tests.multiagent_envs:unannotated_aec", api="aec") == "aec"
    with pytest.raises(EnvBuildError, match="set env.api = 'aec'"):
        make_env(config_from_dict({"env": {"id": "tests.multiagent_envs:unannotated_aec"}}).env)
