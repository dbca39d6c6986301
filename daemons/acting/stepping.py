"""How an actor steps its envs: K gymnasium envs in lock-step, or K PettingZoo worlds; both yield TransitionBatches.

The actor daemon is the same for both; what differs is the stepping and the batch shape. Each tick asks
`choose(policy, obs[B], env_index[B]) -> (actions[B], extras)` once per policy, steps every env, and leaves full
unrolls in `outbox`. New weights may only be swapped in where `at_boundary()` is true, so each batch's
version is the version that chose its actions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from tandem.daemons.acting.unroll import FrameRows, FrameUnrollBuilder, UnrollBuilder
from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.atari import stacks_by_rule
from tandem.daemons.envs.gym_envs import EnvBuildError, EnvGroup, build_each, make_env
from tandem.daemons.envs.rollout import Chooser, MultiAgentRollout
from tandem.daemons.envs.spaces import PolicySpaces, policy_spaces
from tandem.daemons.envs.vector import VECTOR_API, VectorGroup, build_vector
from tandem.daemons.envs.worlds import MULTI_AGENT_APIS, env_api, make_world
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import TransitionBatch

MAX_UNREPORTED_EPISODES = 1000
Episode = tuple[str | None, float, int]  # (agent, or None for a gymnasium env; return; length)


class Stepping:
    """What both steppings share: `stepper` (an env group, or the worlds' rollout) steps the envs, counts their
    steps and episodes and closes them; `new_episodes` keeps the episodes ended since the actor last took them."""

    def __init__(self, stepper: EnvGroup | VectorGroup | MultiAgentRollout):
        self.stepper = stepper
        self.new_episodes: list[Episode] = []

    @property
    def env_steps(self) -> int:
        return self.stepper.env_steps

    @property
    def episodes(self) -> int:
        return self.stepper.episodes

    def episodes_ended(self, episodes: Iterable[Episode]) -> None:
        """Keep `episodes` for the actor's next report, the newest MAX_UNREPORTED_EPISODES at most."""
        self.new_episodes.extend(episodes)
        del self.new_episodes[:-MAX_UNREPORTED_EPISODES]

    def close(self) -> None:
        self.stepper.close()


class GymStepping(Stepping):
    """K gymnasium envs stepped together; one policy ('default') plays them; a batch is T steps of all K.
    `group` steps them: EnvGroup (the built-in loop) or VectorGroup (env.vector), the same StepResults."""

    multi_agent = False

    def __init__(self, group: EnvGroup | VectorGroup, config: RunConfig, stream_id: str, incarnation: int):
        super().__init__(group)
        self.group = group
        self.stream_id, self.incarnation = stream_id, incarnation
        self.unroll_length = config.actors.unroll_length
        self.spaces = {DEFAULT_POLICY: PolicySpaces((), self.group.observation_space, self.group.action_space, 0)}
        self.action_shape = self.group.action_space.shape or ()
        self.action_dtype = np.dtype(self.group.action_space.dtype or np.int64)
        # Frame stacks are kept as their frames from the first step (PROTOCOL.md 2.1.2), checked as they come
        # unless every env is a bare FrameStackObservation (then they follow the rule by construction).
        self.frame_stack = config.env.frames_per_obs(self.group.observation_space.shape or ())
        self.stacks_checked = not (
            isinstance(group, EnvGroup) and all(stacks_by_rule(env, self.frame_stack) for env in group.envs)
        )
        self.frame_rows = FrameRows()  # consecutive unrolls' frames share blocks: joining them is a view
        # A recurrent policy's state per env, carried across unrolls and zeroed where an episode starts; each
        # unroll is sent with the state its first step acted from (PROTOCOL.md 2.1.3)
        size = config.model.core_state_size()
        self.core_state = np.zeros((len(group), size), np.float32) if size else None
        self.first_state: np.ndarray | None = None
        self.unroll: UnrollBuilder | FrameUnrollBuilder | None = None
        self.version = -1
        self.seq = 0
        self.outbox: list[TransitionBatch] = []

    def __len__(self) -> int:
        return len(self.group)

    def at_boundary(self) -> bool:
        return self.unroll is None

    def tick(self, choose: Chooser, versions: dict[str, int]) -> None:
        group = self.group
        if self.unroll is None:
            if self.frame_stack > 1:
                self.unroll = FrameUnrollBuilder(
                    self.unroll_length,
                    group.obs,
                    self.action_shape,
                    self.action_dtype,
                    checked=self.stacks_checked,
                    rows=self.frame_rows,
                )
            else:
                self.unroll = UnrollBuilder(self.unroll_length, group.obs, self.action_shape, self.action_dtype)
            self.version = versions.get(DEFAULT_POLICY, -1)
            self.first_state = None if self.core_state is None else self.core_state.copy()
        if self.core_state is None:
            actions, extras = choose(DEFAULT_POLICY, group.obs, np.arange(len(group)))
        else:
            actions, extras = choose(DEFAULT_POLICY, group.obs, np.arange(len(group)), state=self.core_state)
        result = group.step(actions)
        if self.core_state is not None:
            self.core_state[result.terminated | result.truncated] = 0.0  # the next observation starts an episode
        if result.episodes:
            self.episodes_ended((None, r, n) for r, n in result.episodes)
        if self.unroll.add(actions, result, extras):
            u = self.unroll
            self.outbox.append(
                TransitionBatch(
                    policy_id=DEFAULT_POLICY,
                    actor_id=self.stream_id,
                    incarnation=self.incarnation,
                    seq=self.seq,
                    policy_version=self.version,
                    env_steps=group.env_steps,
                    actions=u.actions,
                    rewards=u.rewards,
                    terminated=u.terminated,
                    truncated=u.truncated,
                    extras=u.extras,
                    core_state=self.first_state,
                    **u.batch_arrays(),
                )
            )
            self.seq += 1
            self.unroll = None

    def recent_return_mean(self) -> float | None:
        return self.group.recent_mean_return()

    def agent_returns(self) -> dict[str, float]:
        return {}


class WorldStepping(Stepping):
    """K PettingZoo worlds; each (world, agent) is its own stream, so every tick is a boundary."""

    multi_agent = True

    def __init__(
        self,
        worlds: list[Any],
        api: str,
        config: RunConfig,
        stream_id: str,
        seed: int,
        incarnation: int,
        record: bool = True,
        first: str | None = None,
    ):
        self.worlds = worlds
        self.spaces = policy_spaces(config, worlds[0], first)  # first: the league member this actor plays
        unroll = config.actors.unroll_length if record else 1
        sizes = {policy: policy_config(config, policy).model.core_state_size() for policy in self.spaces}
        self.rollout = MultiAgentRollout(
            worlds,
            api,
            self.spaces,
            unroll,
            stream_id,
            seed=seed,
            record=record,
            incarnation=incarnation,
            state_sizes=sizes,
        )
        super().__init__(self.rollout)
        self.outbox = self.rollout.outbox

    def __len__(self) -> int:
        return len(self.worlds)

    def at_boundary(self) -> bool:
        return True

    def tick(self, choose: Chooser, versions: dict[str, int]) -> None:
        self.rollout.tick(choose, versions)
        self.episodes_ended(self.rollout.new_episodes)
        self.rollout.new_episodes.clear()

    def restart(self, seed: int) -> None:
        """Reset every world now (an evaluation round starts all its episodes with the same weights)."""
        self.rollout.restart(seed)
        self.new_episodes.clear()

    def recent_return_mean(self) -> float | None:
        returns = self.rollout.recent_returns()
        return float(np.mean(list(returns.values()))) if returns else None

    def agent_returns(self) -> dict[str, float]:
        return self.rollout.recent_returns()


def env_builder(config: RunConfig, training: bool = True) -> tuple[str, Callable[[], Any]]:
    """(api, build one env) for the config's env; nothing is built here (a constructor may hang).
    `training` False: the evaluator's envs (Atari: whole games, unclipped rewards)."""
    api = env_api(config.env)
    if api in MULTI_AGENT_APIS:
        if config.env.max_episode_steps:
            raise EnvBuildError(
                "env.max_episode_steps is for gymnasium envs; give a PettingZoo env its own "
                "limit in env.kwargs (for instance max_cycles)"
            )
        return api, lambda: make_world(config.env, api)
    return api, lambda: make_env(config.env, training)


def actor_seed(config: RunConfig, index: int) -> int:
    return config.run.seed + 1000 * (index + 1)


def actor_envs(config: RunConfig, seed: int) -> tuple[str, Callable[[Callable[[str], None]], list[Any]]]:
    """(api, build(enter_stage) -> envs) for an actor: `env.num_envs` envs each in its own stage, or with
    `env.vector` one vector env of them in one stage. Nothing is built here (a constructor may hang)."""
    api, build_one = env_builder(config)
    if not config.env.vector:
        return api, lambda enter_stage: build_each(config.env.num_envs, build_one, enter_stage)
    if api != "gymnasium":
        raise EnvBuildError(
            f"env.vector = {config.env.vector!r} steps gymnasium envs; env.id {config.env.id!r} "
            f"is a PettingZoo {api} env (set env.vector = '')"
        )
    return VECTOR_API, lambda enter_stage: [build_vector(config.env, seed, enter_stage)]


def make_stepping(
    envs: list[Any],
    api: str,
    config: RunConfig,
    stream_id: str,
    seed: int,
    incarnation: int,
    first: str | None = None,
) -> GymStepping | WorldStepping:
    """The stepping for `envs` already built by `env_builder`'s or `actor_envs`'s function (`first`: a policy
    whose agent patterns are tried before the others', as a self-play league's member in its own actors)."""
    if api in MULTI_AGENT_APIS:
        return WorldStepping(envs, api, config, stream_id, seed, incarnation, first=first)
    games = config.env.games
    group = VectorGroup(envs[0], seed, games=games) if api == VECTOR_API else EnvGroup(envs, seed=seed, games=games)
    return GymStepping(group, config, stream_id, incarnation)
