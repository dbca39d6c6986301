"""A tiny gymnasium env whose frames say where they come from, wrapped in FrameStackObservation, and unrolls of it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tandem.daemons.acting.unroll import UnrollBuilder
from tandem.daemons.envs.gym_envs import EnvGroup
from tandem.daemons.envs.key_stack import KeyFrameStack
from tandem.protocol import TransitionBatch

STACK = 4


class Tagged(gym.Env):
    """Frame = (source, episode, step): unique per env, episode and step; episodes end or are cut at random."""

    observation_space = gym.spaces.Box(0, 2**40, (3,), np.int64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, source: int, seed: int, end_prob: float = 0.3):
        self.source, self.rng, self.end_prob = source, np.random.default_rng(seed), end_prob
        self.episode, self.t = 0, 0

    def _frame(self) -> np.ndarray:
        return np.array([self.source, self.episode, self.t], np.int64)

    def reset(self, *, seed=None, options=None):
        self.episode, self.t = self.episode + 1, 0
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        draw = self.rng.random() / max(self.end_prob, 1e-12)  # below 1: the episode ends (terminated, truncated, both)
        return (
            self._frame(),
            float(self.rng.standard_normal()),
            bool(draw < 0.5 or 0.8 < draw < 1.0),
            bool(0.5 <= draw < 1.0),
            {},
        )


class TaggedDict(Tagged):
    """Tagged's frame as a small uint8 'screen' ([2, 3], the tag's bytes, wrapping) beside a float 'state'."""

    observation_space = gym.spaces.Dict(
        {"screen": gym.spaces.Box(0, 255, (2, 3), np.uint8), "state": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )

    def _frame(self) -> dict:
        tag = super()._frame()
        screen = np.stack([tag % 256, tag // 256 % 256]).astype(np.uint8)
        return {"screen": screen, "state": self.rng.uniform(-1, 1, 2).astype(np.float32)}


def stacked_tagged(source: int, seed: int, end_prob: float) -> gym.Env:
    return gym.wrappers.FrameStackObservation(Tagged(source, seed, end_prob), STACK)


def stacked_screen(source: int, seed: int, end_prob: float) -> gym.Env:
    """A TaggedDict whose screen (only) is the last STACK screens, as KeyFrameStack keeps them."""
    return KeyFrameStack(TaggedDict(source, seed, end_prob), "screen", STACK)


class Actor:
    """K stacked Tagged envs of one (actor, incarnation), yielding whole-stack TransitionBatches of T steps
    (`make=stacked_screen`: a Dict observation with one stacked key)."""

    def __init__(
        self,
        envs: int,
        seed: int,
        actor_id: str = "actor-0",
        incarnation: int = 0,
        end_prob: float = 0.3,
        wrap=lambda env, k: env,
        make=stacked_tagged,
    ):
        made = [wrap(make(1000 * incarnation + 100 * seed + k, seed * 31 + k, end_prob), k) for k in range(envs)]
        self.group = EnvGroup(made, seed=seed)
        self.actor_id, self.incarnation, self.seq = actor_id, incarnation, 0
        self.rng = np.random.default_rng(seed)

    def unroll(self, steps: int, builder=UnrollBuilder) -> TransitionBatch:
        """T steps as `builder` keeps them (UnrollBuilder: whole stacks; FrameUnrollBuilder: frames where it may)."""
        u = builder(steps, self.group.obs, (), np.dtype(np.int64))
        full = steps == 0
        while not full:
            actions = self.rng.integers(0, 2, len(self.group.envs))
            full = u.add(actions, self.group.step(actions))
        batch = TransitionBatch(
            policy_id="default",
            actor_id=self.actor_id,
            incarnation=self.incarnation,
            seq=self.seq,
            policy_version=self.seq,
            env_steps=0,
            actions=u.actions,
            rewards=u.rewards,
            terminated=u.terminated,
            truncated=u.truncated,
            **u.batch_arrays(),
        )
        self.seq += 1
        return batch
