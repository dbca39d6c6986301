"""T steps of K gymnasium envs collected into the arrays of one TransitionBatch (frame stacks as their frames)."""

from __future__ import annotations

import numpy as np

from protocol import stacks
from protocol.stacks import frame_words


class StepColumns:
    """The per-step columns of T steps of K envs: actions, rewards, episode flags and the policy's extras."""

    def __init__(self, steps: int, envs: int, action_shape: tuple, action_dtype: np.dtype):
        self.steps, self.t = steps, 0
        self.actions = np.empty((steps, envs, *action_shape), action_dtype)
        self.rewards = np.empty((steps, envs), np.float32)
        self.terminated = np.empty((steps, envs), bool)
        self.truncated = np.empty((steps, envs), bool)
        self.extras: dict[str, np.ndarray] = {}

    def record(self, actions: np.ndarray, result, extras: dict[str, np.ndarray] | None) -> None:
        t = self.t
        for name, values in (extras or {}).items():
            if name not in self.extras:
                values = np.asarray(values)
                self.extras[name] = np.empty((self.steps, *values.shape), values.dtype)
            self.extras[name][t] = values
        self.actions[t], self.rewards[t] = actions, result.rewards
        self.terminated[t], self.truncated[t] = result.terminated, result.truncated


class UnrollBuilder(StepColumns):
    """Collects T steps of K envs into fresh arrays (fresh each unroll, so zero-copy sends stay safe)."""

    def __init__(self, steps: int, first_obs: np.ndarray, action_shape: tuple, action_dtype: np.dtype):
        super().__init__(steps, first_obs.shape[0], action_shape, action_dtype)
        self.obs = np.empty((steps + 1, *first_obs.shape), first_obs.dtype)
        self.obs[0] = first_obs
        self.finals: list[np.ndarray] = []

    def add(self, actions: np.ndarray, result, extras: dict[str, np.ndarray] | None = None) -> bool:
        """Record one step (and the policy's per-step extras, [K, ...] each); True when the unroll is full."""
        self.record(actions, result, extras)
        self.obs[self.t + 1] = result.obs
        if len(result.final_obs):
            self.finals.append(result.final_obs)
        self.t += 1
        return self.t == self.steps

    def final_obs(self) -> np.ndarray:
        if self.finals:
            return np.concatenate(self.finals)
        return np.empty((0, *self.obs.shape[2:]), self.obs.dtype)

    def batch_arrays(self) -> dict:
        """The TransitionBatch arrays that hold observations."""
        return {"obs": self.obs, "final_obs": self.final_obs()}


class FrameUnrollBuilder(StepColumns):
    """UnrollBuilder's interface for observations that are stacks of S frames: it keeps only each observation's
    newest frame (plus obs[0]'s older ones), as PROTOCOL.md 2.1.2 sends them, while the stacks follow
    FrameStackObservation's rule.

    The rule is checked at each step against the step before, while both stacks are fresh in cache (checking
    a whole unroll afterwards reads it again from memory and cost an actor more than sending it). Each group
    hands out a new obs array every step, so holding the previous one costs no copy. At the first stack that
    breaks the rule, the stacks so far are rebuilt (exact: they followed it) and the unroll goes on whole.
    """

    def __init__(self, steps: int, first_obs: np.ndarray, action_shape: tuple, action_dtype: np.dtype):
        super().__init__(steps, first_obs.shape[0], action_shape, action_dtype)
        self.stack = first_obs.shape[1]
        self.frames = np.empty((steps + 1, first_obs.shape[0], *first_obs.shape[2:]), first_obs.dtype)
        self.frames[0] = first_obs[:, -1]
        self.history = np.ascontiguousarray(first_obs[:, :-1])
        self.prev, self.prev_words = first_obs, frame_words(first_obs, first_obs.ndim - 2)
        self.whole: np.ndarray | None = None  # [T+1, K, S, ...] once a stack broke the rule
        self.finals: list[np.ndarray] = []  # newest frames of final observations (whole stacks once whole)

    def add(self, actions: np.ndarray, result, extras: dict[str, np.ndarray] | None = None) -> bool:
        """Record one step (and the policy's per-step extras, [K, ...] each); True when the unroll is full."""
        self.record(actions, result, extras)
        t, obs, final_obs = self.t, result.obs, result.final_obs
        if self.whole is None and not self.follows(obs, final_obs, result.terminated | result.truncated, result.truncated):
            self.go_whole()
        if self.whole is None:
            self.frames[t + 1] = obs[:, -1]
            if len(final_obs):
                self.finals.append(final_obs[:, -1])
        else:
            self.whole[t + 1] = obs
            if len(final_obs):
                self.finals.append(final_obs)
        self.prev = obs
        self.t += 1
        return self.t == self.steps

    def follows(self, obs: np.ndarray, final_obs: np.ndarray, done: np.ndarray, truncated: np.ndarray) -> bool:
        """The new stacks are the previous ones shifted by a frame, an episode's first stack is its frame S times,
        and a truncated episode's last stack is the previous one shifted (PROTOCOL.md 2.1.2)."""
        if obs.shape != self.prev.shape or obs.dtype != self.prev.dtype:
            return False
        new, old = frame_words(obs, obs.ndim - 2), self.prev_words
        self.prev_words = new  # the next step compares against these words: one view a step, not two
        if not done.any():  # the common step: one comparison of every env's older frames
            return bool((new[:, :-1] == old[:, 1:]).all())
        for k in range(len(done)):  # an episode ended somewhere: env by env
            if done[k]:
                if not (new[k, :-1] == new[k, -1:]).all():
                    return False
            elif not (new[k, :-1] == old[k, 1:]).all():
                return False
        if len(final_obs):
            if (final_obs.shape[1:] != obs.shape[1:] or final_obs.dtype != obs.dtype
                    or len(final_obs) != np.count_nonzero(truncated)):
                return False
            if not (frame_words(final_obs, final_obs.ndim - 2)[:, :-1] == old[truncated, 1:]).all():
                return False
        return True

    def go_whole(self) -> None:
        """Rebuild the stacks recorded so far, exactly (they followed the rule), and keep whole stacks from now on."""
        t = self.t
        finals = np.concatenate(self.finals) if self.finals else np.empty((0, *self.frames.shape[2:]), self.frames.dtype)
        obs, final = stacks.rebuild(self.frames[:t + 1], self.history, self.terminated[:t] | self.truncated[:t],
                                    finals, self.truncated[:t])
        self.whole = np.empty((self.steps + 1, *obs.shape[1:]), obs.dtype)
        self.whole[:t + 1] = obs
        self.finals = [final] if len(final) else []
        self.frames = None

    def final_obs(self) -> np.ndarray:
        if self.finals:
            return np.concatenate(self.finals)
        shape = self.whole.shape[2:] if self.whole is not None else self.frames.shape[2:]
        return np.empty((0, *shape), self.prev.dtype)

    def batch_arrays(self) -> dict:
        """The TransitionBatch arrays: frames with `obs_stack` and `obs_history`, or whole stacks."""
        if self.whole is not None:
            return {"obs": self.whole, "final_obs": self.final_obs()}
        return {"obs": self.frames, "final_obs": self.final_obs(), "obs_stack": self.stack, "obs_history": self.history}
