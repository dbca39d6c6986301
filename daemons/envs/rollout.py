"""K copies of a PettingZoo world stepped together: each tick, one batched action choice per policy."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from tandem.daemons.envs.gym_envs import close_all
from tandem.daemons.envs.seats import SelfPlaySeats
from tandem.daemons.envs.spaces import ObsAdapter, PolicySpaces, env_actions
from tandem.daemons.envs.streams import AgentStream
from tandem.protocol import TransitionBatch

# choose(policy, obs [B, ...], worlds [B], state=None) -> (actions [B], {extra name: [B, ...]}); a recurrent
# policy's caller passes `state` [B, S], which the choice advances in place (None: a feed-forward policy)
Chooser = Callable[..., tuple[np.ndarray, dict[str, np.ndarray]]]


class WorldStepError(ValueError):
    """The env broke the PettingZoo contract (for instance it never hands the turn to a live agent)."""


class MultiAgentRollout:
    """Steps K worlds of one PettingZoo API ('aec': agents act in turn; 'parallel': all live agents at once).

    An AEC tick gives one turn in every world, a parallel tick one joint step; either way every policy's
    actions come from one batched call. With `record`, each (world, agent) is an AgentStream whose full
    unrolls wait in `outbox` as TransitionBatches for the actor to send to their policy's learner.
    """

    def __init__(
        self,
        worlds: list[Any],
        api: str,
        spaces: dict[str, PolicySpaces],
        unroll_length: int,
        stream_prefix: str,
        seed: int,
        record: bool = True,
        incarnation: int = 0,
        return_window: int = 100,
        state_sizes: dict[str, int] | None = None,
    ):
        self.worlds, self.api, self.spaces, self.record = worlds, api, spaces, record
        # Self-play (`seat`): one seat per world learns, the others play `opponent_choose(version, obs) -> actions`
        self.seats: SelfPlaySeats | None = None
        self.opponent_choose: Callable[[int | None, np.ndarray], np.ndarray] | None = None
        self.incarnation = incarnation
        self.policy_of = {agent: policy for policy, s in spaces.items() for agent in s.agents}
        self.adapters = {
            agent: ObsAdapter(worlds[0].observation_space(agent), f"agent {agent!r}") for agent in self.policy_of
        }
        self.streams: dict[tuple[int, str], AgentStream] = {}
        for k in range(len(worlds)):
            for agent, policy in self.policy_of.items():
                dtype = np.dtype(spaces[policy].action_space.dtype or np.int64)
                size = (state_sizes or {}).get(policy, 0)  # a recurrent policy's agents each carry a state
                self.streams[(k, agent)] = AgentStream(f"{stream_prefix}/{k}/{agent}", unroll_length, dtype, size)
        self.outbox: list[TransitionBatch] = []
        self.running_return: dict[tuple[int, str], float] = {key: 0.0 for key in self.streams}
        self.running_length: dict[tuple[int, str], int] = {key: 0 for key in self.streams}
        self.finished: deque[tuple[str, float, int]] = deque(maxlen=return_window)  # (agent, return, length)
        self.new_episodes: list[tuple[str, float, int]] = []  # since the caller last took them
        self.env_steps = 0  # actions taken, over every agent of every world
        self.episodes = 0  # world episodes ended
        self.current: list[dict[str, np.ndarray]] = [{} for _ in worlds]  # parallel: adapted obs of live agents
        self.max_skips = 4 * len(self.policy_of) + 8
        for k in range(len(worlds)):
            self._reset(k, seed + k)

    # ------------------------------------------------------------------ shared bookkeeping

    def _reset(self, k: int, seed: int | None = None) -> None:
        result = self.worlds[k].reset(seed=seed)
        if self.seats is not None:
            self._seat_world(k)
        if self.api == "parallel":
            observations = result[0] if isinstance(result, tuple) else result
            self.current[k] = {}
            for agent in self.worlds[k].agents:
                self._observe(k, agent, observations[agent])

    def seat(self, seats: SelfPlaySeats, opponent_choose: Callable[[int | None, np.ndarray], np.ndarray]) -> None:
        """Self-play from now on: every world's current episode gets its seats (the worlds are at a start)."""
        self.seats, self.opponent_choose = seats, opponent_choose
        for k in range(len(self.worlds)):
            self._seat_world(k)

    def _seat_world(self, k: int) -> None:
        """World k starts an episode: its seats among the agents the learning policy plays."""
        learning = self.seats.policy
        self.seats.new_episode(k, [a for a in self.worlds[k].agents if self.policy_of.get(a) == learning])

    def _check_agent(self, agent: str) -> str:
        policy = self.policy_of.get(agent)
        if policy is None:
            raise WorldStepError(f"the env has an agent {agent!r} that is not in its possible_agents")
        return policy

    def _observe(self, k: int, agent: str, raw_obs: Any) -> np.ndarray:
        self._check_agent(agent)
        obs = self.adapters[agent](raw_obs)
        if self.api == "parallel":
            self.current[k][agent] = obs
        stream = self.streams[(k, agent)]
        if self.record and self.learns(k, agent):
            stream.observe(obs)
            if stream.ready():
                self.outbox.append(stream.take(self.policy_of[agent], self.incarnation, self.env_steps))
        return obs

    def _settle(self, k: int, agent: str, reward: float, terminated: bool, truncated: bool, raw_obs: Any) -> None:
        """The outcome of the agent's last action (rewards since then), and the end of its episode if so."""
        key = (k, agent)
        self.running_return[key] += float(reward)
        stream = self.streams[key]
        if self.record and stream.awaiting_outcome:
            final = self.adapters[agent](raw_obs) if truncated else None
            stream.outcome(reward, terminated, truncated, final)
        if terminated or truncated:
            if stream.state is not None:  # recorded or not, the agent's next episode starts from a fresh state
                stream.state[:] = 0.0
            episode = (agent, self.running_return[key], self.running_length[key])
            self.finished.append(episode)
            self.new_episodes.append(episode)
            if self.seats is not None:
                self.seats.agent_ended(k, agent, self.running_return[key])
            self.running_return[key], self.running_length[key] = 0.0, 0

    def learns(self, k: int, agent: str) -> bool:
        """The agent's turns in world k are its policy's to record (all of them, but for self-play's opponents)."""
        return self.seats is None or self.policy_of[agent] != self.seats.policy or self.seats.learning(k, agent)

    def _world_over(self, k: int) -> None:
        """World k's episode ended (every agent done): score it for self-play, and start the next."""
        self.episodes += 1
        if self.seats is not None:
            self.seats.episode_over(k)
        self._reset(k)

    def _act(self, turns: list[tuple[int, str, np.ndarray]], choose: Chooser, versions: dict[str, int]) -> list:
        """One batched choice per policy for `turns`; the actions in turn order."""
        actions: list = [None] * len(turns)
        by_policy: dict[str, list[int]] = {}
        by_opponent: dict[int | None, list[int]] = {}
        for i, (k, agent, _) in enumerate(turns):
            if self.learns(k, agent):
                by_policy.setdefault(self.policy_of[agent], []).append(i)
            else:
                by_opponent.setdefault(self.seats.opponent[k], []).append(i)
        for version, idx in by_opponent.items():  # opponents' turns: acted, never recorded
            chosen = self.opponent_choose(version, np.stack([turns[i][2] for i in idx]))
            sent = env_actions(self.spaces[self.seats.policy].action_space, np.asarray(chosen))
            for i, action in zip(idx, sent):
                k, agent, _ = turns[i]
                actions[i] = action.item() if np.ndim(action) == 0 else action
                self.running_length[(k, agent)] += 1
        for policy, idx in by_policy.items():
            obs, worlds = np.stack([turns[i][2] for i in idx]), np.array([turns[i][0] for i in idx])
            streams = [self.streams[(turns[i][0], turns[i][1])] for i in idx]
            if streams[0].state is None:
                chosen, extras = choose(policy, obs, worlds)
            else:  # the agents' states, advanced by the choice and put back
                states = np.stack([stream.state for stream in streams])
                chosen, extras = choose(policy, obs, worlds, state=states)
                for stream, state in zip(streams, states):
                    stream.state[:] = state
            sent = env_actions(self.spaces[policy].action_space, np.asarray(chosen))
            for j, (i, action) in enumerate(zip(idx, sent)):
                k, agent, _ = turns[i]
                actions[i] = action.item() if np.ndim(action) == 0 else action
                if self.record:
                    self.streams[(k, agent)].acted(
                        chosen[j], versions.get(policy, -1), {name: values[j] for name, values in extras.items()}
                    )
                self.running_length[(k, agent)] += 1
        self.env_steps += len(turns)
        return actions

    def restart(self, seed: int) -> None:
        """Reset every world now (an evaluation round starts all its episodes with the same weights)."""
        if self.record:
            raise RuntimeError("restart would cut the recorded streams; only an evaluating rollout restarts")
        for key in self.running_return:
            self.running_return[key], self.running_length[key] = 0.0, 0
            if self.streams[key].state is not None:
                self.streams[key].state[:] = 0.0
        self.new_episodes.clear()
        for k in range(len(self.worlds)):
            self._reset(k, seed + k)

    def recent_returns(self) -> dict[str, float]:
        """Mean return of each agent's recent episodes."""
        sums: dict[str, list[float]] = {}
        for agent, ret, _ in self.finished:
            sums.setdefault(agent, []).append(ret)
        return {agent: float(np.mean(values)) for agent, values in sums.items()}

    # ------------------------------------------------------------------ ticks

    def tick(self, choose: Chooser, versions: dict[str, int]) -> None:
        if self.api == "aec":
            self._tick_aec(choose, versions)
        else:
            self._tick_parallel(choose, versions)

    def _next_turn(self, k: int) -> tuple[int, str, np.ndarray]:
        """Settle finished agents (they step None) and resets until a live agent of world k is to act."""
        env = self.worlds[k]
        for _ in range(self.max_skips):
            if not env.agents:
                self._world_over(k)
                continue
            agent = env.agent_selection
            self._check_agent(agent)
            raw_obs, reward, terminated, truncated, _ = env.last()
            self._settle(k, agent, reward, terminated, truncated, raw_obs)
            if terminated or truncated:
                env.step(None)  # how AEC removes a finished agent
                continue
            return k, agent, self._observe(k, agent, raw_obs)
        raise WorldStepError(f"world {k} gave no live agent a turn in {self.max_skips} steps")

    def _tick_aec(self, choose: Chooser, versions: dict[str, int]) -> None:
        turns = [self._next_turn(k) for k in range(len(self.worlds))]
        for (k, _, _), action in zip(turns, self._act(turns, choose, versions)):
            self.worlds[k].step(action)

    def _tick_parallel(self, choose: Chooser, versions: dict[str, int]) -> None:
        turns = []
        for k, env in enumerate(self.worlds):
            for agent in env.agents:
                if agent not in self.current[k]:
                    raise WorldStepError(f"world {k}: live agent {agent!r} got no observation")
                turns.append((k, agent, self.current[k][agent]))
        actions = self._act(turns, choose, versions)
        joint: list[dict[str, Any]] = [{} for _ in self.worlds]
        for (k, agent, _), action in zip(turns, actions):
            joint[k][agent] = action
        for k, env in enumerate(self.worlds):
            if not joint[k]:
                continue
            observations, rewards, terms, truncs, _ = env.step(joint[k])
            for agent in joint[k]:
                terminated, truncated = bool(terms.get(agent, False)), bool(truncs.get(agent, False))
                self._settle(k, agent, rewards.get(agent, 0.0), terminated, truncated, observations.get(agent))
                self.current[k].pop(agent, None)
                if not (terminated or truncated) and agent in observations:
                    self._observe(k, agent, observations[agent])
            if not env.agents:
                self._world_over(k)

    def close(self) -> None:
        close_all(self.worlds)
