"""One agent of one world as a stream of steps, cut into T-step unrolls that travel as K=1 TransitionBatches."""

from __future__ import annotations

import numpy as np

from tandem.protocol import TransitionBatch, keyed


class AgentStream:
    """The steps one agent took in one world since its last unroll.

    Call order per step: `observe(obs)` at the agent's turn, `acted(action, version)`, then `outcome(...)` at
    its next turn (or when the world reports it). After an episode's last step the next `observe` is the
    agent's first observation of the next episode, as obs[t+1] is after a reset in TransitionBatch.
    Streams advance at their own pace (agents take turns, leave early, come back after a reset), which is
    why each is its own unroll: a batch of K streams would wait for the slowest.
    """

    def __init__(self, stream_id: str, steps: int, action_dtype: np.dtype, state_size: int = 0):
        self.stream_id, self.steps, self.action_dtype = stream_id, steps, action_dtype
        self.seq = 0
        # A recurrent policy's state (PROTOCOL.md 2.1.3): `state` is what the agent acts from next (its owner
        # advances it with each action and zeroes it when an episode ends); `first_state` what the unroll began from
        self.state = np.zeros(state_size, np.float32) if state_size else None
        self.first_state = None if self.state is None else self.state.copy()
        self._clear()
        self.awaiting_outcome = False

    def _clear(self) -> None:
        self.obs: list[np.ndarray] = []
        self.actions: list = []
        self.rewards: list[float] = []
        self.terminated: list[bool] = []
        self.truncated: list[bool] = []
        self.finals: list[np.ndarray] = []
        self.versions: list[int] = []
        self.extras: list[dict[str, np.ndarray]] = []

    def observe(self, obs: np.ndarray) -> None:
        if len(self.obs) != len(self.actions):
            raise RuntimeError(f"{self.stream_id}: two observations without an action between them")
        self.obs.append(obs)

    def acted(self, action, version: int, extras: dict[str, np.ndarray] | None = None) -> None:
        if len(self.obs) != len(self.actions) + 1 or self.awaiting_outcome:
            raise RuntimeError(f"{self.stream_id}: an action without an observation")
        self.actions.append(action)
        self.extras.append(extras or {})
        self.versions.append(version)
        self.awaiting_outcome = True

    def outcome(self, reward: float, terminated: bool, truncated: bool, final_obs: np.ndarray | None) -> None:
        if not self.awaiting_outcome:
            raise RuntimeError(f"{self.stream_id}: an outcome without an action")
        self.rewards.append(float(reward))
        self.terminated.append(bool(terminated))
        self.truncated.append(bool(truncated))
        if truncated:
            self.finals.append(final_obs)
        if self.state is not None and (terminated or truncated):
            self.state[:] = 0.0  # the next observation starts an episode
        self.awaiting_outcome = False

    def ready(self) -> bool:
        """T steps with their outcomes, and the observation after the last one."""
        return len(self.actions) == self.steps and len(self.obs) == self.steps + 1 and not self.awaiting_outcome

    def take(self, policy_id: str, incarnation: int, env_steps: int) -> TransitionBatch:
        """The full unroll as a batch; the stream goes on from its last observation."""
        if not self.ready():
            raise RuntimeError(f"{self.stream_id}: unroll not complete")
        obs = keyed.map_obs(lambda a: a[:, None], keyed.stack(self.obs))  # a Dict observation (entities) per key
        finals = keyed.stack(self.finals) if self.finals else keyed.empty_rows(keyed.take(obs, 0), 0)
        batch = TransitionBatch(
            policy_id=policy_id,
            actor_id=self.stream_id,
            incarnation=incarnation,
            seq=self.seq,
            policy_version=min(self.versions),  # the oldest version that acted: lag is never understated
            env_steps=env_steps,
            obs=obs,
            actions=np.asarray(self.actions, self.action_dtype).reshape(self.steps, 1, *np.shape(self.actions[0])),
            rewards=np.asarray(self.rewards, np.float32)[:, None],
            terminated=np.asarray(self.terminated)[:, None],
            truncated=np.asarray(self.truncated)[:, None],
            final_obs=finals,
            extras={
                name: np.stack([np.asarray(step[name]) for step in self.extras])[:, None] for name in self.extras[0]
            }
            if self.extras
            else {},
            core_state=None if self.first_state is None else self.first_state[None].copy(),
        )
        if self.state is not None:  # the next unroll starts from the last observation, with the state to act on it
            self.first_state = self.state.copy()
        self.seq += 1
        last = self.obs[-1]
        self._clear()
        self.obs.append(last)
        return batch
