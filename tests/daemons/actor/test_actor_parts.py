"""Pure parts of the actor side: backlog drops oldest, Ape-X epsilons, unrolls from real CartPole envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tandem.daemons.acting.backlog import Backlog
from tandem.daemons.acting.unroll import UnrollBuilder
from tandem.daemons.actor.exploration import actor_epsilons, decayed
from tandem.daemons.envs.gym_envs import EnvGroup, make_env
from tandem.daemons.evaluator.rounds import episode_quotas
from tandem.daemons.settings.schema import EnvSection
from tests.protocol.samples import batch_of


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
    assert eps[0] == 0.4 and np.isclose(eps[-1], 0.4**8)
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
    arrays = (unroll.obs, unroll.actions, unroll.rewards, unroll.terminated, unroll.truncated, unroll.final_obs())
    batch = batch_of(*arrays, actor="a", incarnation=1, version=0, env_steps=envs.env_steps)
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


class BreaksTheRule(gym.ObservationWrapper):
    """Changes the oldest frame of the stack at the given steps of the env's life (counted across episodes):
    the stacks no longer follow FrameStackObservation's rule there."""

    def __init__(self, env, at: set[int]):
        super().__init__(env)
        self.at, self.calls = at, 0

    def observation(self, obs):
        self.calls += 1
        if self.calls in self.at:
            obs = obs.copy()
            obs[0, 2] += 10**6
        return obs


@pytest.mark.parametrize(
    "breaks, goes_whole",
    [(set(), 0), ({1}, 0), ({2}, None), ({7}, 1), ({30}, 1)],
    ids=["never", "first-obs", "first-step", "mid", "later"],
)
def test_frame_unroll_builder_keeps_frames_while_the_rule_holds_and_whole_stacks_after(breaks, goes_whole):
    """Frames kept by the builder rebuild exactly what whole stacks hold, across episode ends and truncations;
    from a stack that breaks the rule on, the unroll goes whole and equals UnrollBuilder's."""
    from tandem.daemons.acting.unroll import FrameUnrollBuilder
    from tandem.protocol import stacks
    from tests.frame_envs import Actor

    def wrap(env, k):
        return BreaksTheRule(env, breaks if k == 1 else set())

    kept, whole = Actor(3, seed=5, wrap=wrap), Actor(3, seed=5, wrap=wrap)  # same seeds: the same episodes
    shapes = []
    for _ in range(6):
        mine, ref = kept.unroll(8, FrameUnrollBuilder), whole.unroll(8)
        shapes.append(mine.obs_stack)
        # frames exactly when the whole unroll's stacks follow the rule (the first obs is sent as it is)
        assert mine.obs_stack == (1 if stacks.pack(ref, 4) is None else 4)
        got = stacks.unpack(mine)
        np.testing.assert_array_equal(got.obs, ref.obs)
        np.testing.assert_array_equal(got.final_obs, ref.final_obs)
        for name in ("actions", "rewards", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(mine, name), getattr(ref, name))
    if goes_whole is not None:  # None: the changed obs may end an episode and never be seen
        assert shapes.count(1) == goes_whole, shapes


def test_only_bare_reset_padded_frame_stacks_go_unchecked():
    """An actor skips the per-step rule check only where the env itself guarantees the rule."""
    from tandem.daemons.envs.atari import stacks_by_rule
    from tests.frame_envs import Tagged

    bare = gym.wrappers.FrameStackObservation(Tagged(1, 0), 4)
    assert stacks_by_rule(bare, 4)
    assert not stacks_by_rule(bare, 3)  # not the stack the actor cuts
    assert not stacks_by_rule(gym.wrappers.FrameStackObservation(Tagged(1, 0), 4, padding_type="zero"), 4)
    assert not stacks_by_rule(BreaksTheRule(bare, set()), 4)  # a wrapper over the stack may change it
    assert not stacks_by_rule(Tagged(1, 0), 4)


def test_unchecked_frames_of_bare_frame_stacks_rebuild_exactly():
    """Frames kept without the check (stacks by construction) rebuild the whole stacks, across many episode
    ends and truncations (every third step ends an episode on average)."""
    from functools import partial

    from tandem.daemons.acting.unroll import FrameUnrollBuilder
    from tandem.protocol import stacks
    from tests.frame_envs import Actor

    kept, whole = Actor(3, seed=9, end_prob=0.35), Actor(3, seed=9, end_prob=0.35)
    ends = 0
    for _ in range(12):
        mine, ref = kept.unroll(8, partial(FrameUnrollBuilder, checked=False)), whole.unroll(8)
        assert mine.obs_stack == 4
        got = stacks.unpack(mine)
        np.testing.assert_array_equal(got.obs, ref.obs)
        np.testing.assert_array_equal(got.final_obs, ref.final_obs)
        ends += int((ref.terminated | ref.truncated).sum())
    assert ends >= 30


class GrantingChannel:
    """The control channel's request side as the supervisor answers it: every start token granted, each ask kept."""

    def __init__(self, stages):
        self.asked, self.stages = [], stages

    def request(self, command, args, timeout_s):
        from tandem.protocol import ControlReply

        self.asked.append((command, dict(args), list(self.stages)))
        return ControlReply(1, True, data={"granted": True, "holders": [args["name"]]})


def test_the_evaluator_takes_a_start_token_before_it_builds_envs(caplog):
    """One more native emulator than supervisor.max_concurrent_starts allows must not start: the evaluator asks
    for a token, as actors do, before its first env constructor runs."""
    from tandem.daemons.config.loader import config_from_dict
    from tandem.daemons.evaluator.daemon import Evaluator
    from tandem.daemons.runtime.signals import StopFlag

    evaluator = Evaluator(config_from_dict({"eval": {"num_envs": 2}}), StopFlag(), control_endpoint=None)
    stages = []
    evaluator.runtime.reporter.set_stage = lambda stage: stages.append(stage)  # what the heartbeats would carry
    channel = evaluator.runtime.channel = GrantingChannel(stages)
    rounds = evaluator.build()
    try:
        assert [(c, a) for c, a, _ in channel.asked] == [("start_token", {"name": "evaluator"})]
        seen_then = channel.asked[0][2]
        assert seen_then == ["wait_start_token"]  # asked before any env was built
        assert [s for s in stages if s.startswith("build_env")]  # and built after
    finally:
        rounds.close()
