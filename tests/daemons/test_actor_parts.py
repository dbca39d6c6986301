"""Pure parts of the actor side: backlog drops oldest, Ape-X epsilons, unrolls from real CartPole envs."""

from __future__ import annotations

import numpy as np

from daemons.actor.exploration import actor_epsilons, decayed
from daemons.actor.unroll import UnrollBuilder
from daemons.actor.backlog import Backlog
from daemons.config.schema import EnvSection
from daemons.envs.gym_envs import EnvGroup, make_env
from daemons.evaluator.rounds import episode_quotas
from protocol import TransitionBatch


def test_backlog_drops_oldest_and_counts():
    backlog = Backlog(3)
    for i in range(5):
        backlog.push(i)
    assert list(backlog.queue) == [2, 3, 4] and backlog.dropped == 2
    accepted = []

    def send(item):
        if len(accepted) >= 2:
            return False  # the learner's socket is full
        accepted.append(item)
        return True

    assert backlog.flush(send) == 2
    assert accepted == [2, 3] and list(backlog.queue) == [4] and backlog.sent == 2


def test_apex_epsilons_spread_over_every_env():
    eps = np.concatenate([actor_epsilons(0.4, 7.0, i, 2, 4) for i in range(2)])
    assert eps[0] == 0.4 and np.isclose(eps[-1], 0.4 ** 8)
    assert np.all(np.diff(eps) < 0)
    assert np.allclose(actor_epsilons(0.3, 7.0, 0, 1, 1), [0.3])
    assert np.allclose(decayed(np.array([0.1]), 0, 100), [1.0])
    assert np.allclose(decayed(np.array([0.1]), 50, 100), [0.55])
    assert np.allclose(decayed(np.array([0.1]), 500, 100), [0.1])


def test_unrolls_from_real_envs_encode_episode_ends():
    envs = EnvGroup([make_env(EnvSection(id="CartPole-v1", max_episode_steps=7)) for _ in range(3)], seed=0)
    rng = np.random.default_rng(0)
    unroll = UnrollBuilder(20, envs.obs, (), np.dtype(np.int64))
    done = False
    while not done:
        actions = rng.integers(0, 2, 3)
        done = unroll.add(actions, envs.step(actions))
    batch = TransitionBatch("default", "a", 1, 0, 0, envs.env_steps, unroll.obs, unroll.actions, unroll.rewards,
                            unroll.terminated, unroll.truncated, unroll.final_obs())
    batch.check_shapes()
    assert batch.truncated.any(), "a 7-step limit must truncate within 20 steps"
    for t, k in np.argwhere(batch.truncated | batch.terminated):
        # the row after an episode end is a fresh reset: CartPole starts within +-0.05
        assert np.all(np.abs(batch.obs[t + 1, k]) <= 0.05)
    assert len(batch.final_obs) == int(batch.truncated.sum())
    assert envs.episodes == int((batch.truncated | batch.terminated).sum())
    envs.close()


def test_episode_quotas():
    assert list(episode_quotas(20, 4)) == [5, 5, 5, 5]
    assert list(episode_quotas(7, 3)) == [3, 2, 2]
