"""T steps of K gymnasium envs collected into the arrays of one TransitionBatch (frame stacks as their frames)."""

from __future__ import annotations

import numpy as np

from tandem.daemons.acting.backlog import JOIN_MAX_BYTES
from tandem.protocol import keyed, stacks
from tandem.protocol.stacks import frame_words


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
        super().__init__(steps, keyed.row_count(first_obs), action_shape, action_dtype)
        # [T+1, K, ...], or one such array per key of a Dict observation
        self.obs = keyed.map_obs(lambda a: np.empty((steps + 1, *a.shape), a.dtype), first_obs)
        keyed.put(self.obs, 0, first_obs)
        self.finals: list[np.ndarray] = []

    def add(self, actions: np.ndarray, result, extras: dict[str, np.ndarray] | None = None) -> bool:
        """Record one step (and the policy's per-step extras, [K, ...] each); True when the unroll is full."""
        self.record(actions, result, extras)
        keyed.put(self.obs, self.t + 1, result.obs)
        if keyed.row_count(result.final_obs):
            self.finals.append(result.final_obs)
        self.t += 1
        return self.t == self.steps

    def final_obs(self) -> np.ndarray:
        if self.finals:
            return keyed.concat(self.finals)
        return keyed.map_obs(lambda a: np.empty((0, *a.shape[2:]), a.dtype), self.obs)

    def batch_arrays(self) -> dict:
        """The TransitionBatch arrays that hold observations."""
        return {"obs": self.obs, "final_obs": self.final_obs()}


class FrameRows:
    """Where one stream's FrameUnrollBuilders keep their newest frames, unroll after unroll, in shared blocks.

    An unroll's first row is the row the one before ended on (the same observation), so consecutive unrolls
    are consecutive row ranges of one array: joining them into one message (`tandem.protocol.joining`) is then a
    view, not a copy, and the overlap row is the same memory. Where no episode started in the previous
    unroll's last S-1 steps, the older frames of the next one's first stacks are rows already written, so
    its `obs_history` is a view of them too. Blocks are never written twice (sends are zero-copy); a new
    one starts when one is full, and a block holds about JOIN_MAX_BYTES of frames, what one message joins.
    """

    def __init__(self, unrolls_per_block: int | None = None):
        self.per_block = unrolls_per_block  # None: sized from the first unroll
        self.block: np.ndarray | None = None
        self.row = 0  # the row the last unroll ended on
        self.last_obs: np.ndarray | None = None  # the observation whose newest frames are in that row
        self.history_in_rows = False  # the S-1 rows before it hold that observation's older frames

    def take(self, steps: int, first_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """([T+1, K, *frame] rows for the next unroll, row 0 holding first_obs's newest frames; its
        obs_history as a view of earlier rows, or None where those rows do not hold it)."""
        block, stack = self.block, first_obs.shape[1]
        if (
            block is not None
            and first_obs is self.last_obs
            and self.row + steps < len(block)
            and block.shape[1:] == (first_obs.shape[0], *first_obs.shape[2:])
            and block.dtype == first_obs.dtype
        ):
            history = block[self.row - stack + 1 : self.row].swapaxes(0, 1) if self.history_in_rows else None
            return block[self.row : self.row + steps + 1], history
        if self.per_block is None:
            self.per_block = max(1, min(16, JOIN_MAX_BYTES // max(first_obs[:, -1].nbytes * steps, 1)))
        self.block = np.empty((self.per_block * steps + 1, first_obs.shape[0], *first_obs.shape[2:]), first_obs.dtype)
        self.row, self.last_obs = 0, None
        self.block[0] = first_obs[:, -1]
        return self.block[: steps + 1], None

    def ended(self, unroll: FrameUnrollBuilder) -> None:
        """`unroll` is full: the next one may start on its last row (unless it went whole: then on a new block)."""
        if unroll.whole is not None or self.block is None:
            self.block, self.last_obs = None, None
            return
        steps, stack = unroll.steps, unroll.stack
        self.row += steps
        self.last_obs = unroll.prev
        self.history_in_rows = (
            steps >= stack - 1
            and self.row >= stack - 1
            and not stacks.starts_in_last_stack(unroll.terminated, unroll.truncated, stack).any()
        )


class FrameUnrollBuilder(StepColumns):
    """UnrollBuilder's interface for observations that are stacks of S frames: it keeps only each observation's
    newest frame (plus obs[0]'s older ones), as PROTOCOL.md 2.1.2 sends them, while the stacks follow
    FrameStackObservation's rule.

    With `checked` (the default) the rule is checked at each step against the step before, while both stacks
    are fresh in cache (checking a whole unroll afterwards reads it again from memory and cost an actor more
    than sending it). Each group hands out a new obs array every step, so holding the previous one costs no
    copy. At the first stack that breaks the rule, the stacks so far are rebuilt (exact: they followed it)
    and the unroll goes on whole. `checked=False` is for stacks that follow the rule by construction
    (`tandem.daemons.envs.atari.stacks_by_rule`): the check reads every stack, most of a sender's memory traffic.
    """

    def __init__(
        self,
        steps: int,
        first_obs: np.ndarray,
        action_shape: tuple,
        action_dtype: np.dtype,
        checked: bool = True,
        rows: FrameRows | None = None,
    ):
        super().__init__(steps, first_obs.shape[0], action_shape, action_dtype)
        self.stack, self.checked, self.rows = first_obs.shape[1], checked, rows
        self.frames, history = (rows or FrameRows(1)).take(steps, first_obs)
        if history is None:
            # Unchecked stacks come from EnvGroup, which hands out a fresh array every step and never writes it
            # again: a view is safe, copied only if this unroll starts a message (a joined one's is unused).
            history = first_obs[:, :-1] if not checked else np.ascontiguousarray(first_obs[:, :-1])
        self.history = history
        self.prev = first_obs
        self.prev_words = frame_words(first_obs, first_obs.ndim - 2) if checked else None
        self.whole: np.ndarray | None = None  # [T+1, K, S, ...] once a stack broke the rule
        self.finals: list[np.ndarray] = []  # newest frames of final observations (whole stacks once whole)

    def add(self, actions: np.ndarray, result, extras: dict[str, np.ndarray] | None = None) -> bool:
        """Record one step (and the policy's per-step extras, [K, ...] each); True when the unroll is full."""
        self.record(actions, result, extras)
        t, obs, final_obs = self.t, result.obs, result.final_obs
        if (
            self.checked
            and self.whole is None
            and not self.follows(obs, final_obs, result.terminated | result.truncated, result.truncated)
        ):
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
        if self.t < self.steps:
            return False
        if self.rows is not None:
            self.rows.ended(self)
        return True

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
            if (
                final_obs.shape[1:] != obs.shape[1:]
                or final_obs.dtype != obs.dtype
                or len(final_obs) != np.count_nonzero(truncated)
            ):
                return False
            if not (frame_words(final_obs, final_obs.ndim - 2)[:, :-1] == old[truncated, 1:]).all():
                return False
        return True

    def go_whole(self) -> None:
        """Rebuild the stacks recorded so far, exactly (they followed the rule), and keep whole stacks from now on."""
        t = self.t
        finals = (
            np.concatenate(self.finals) if self.finals else np.empty((0, *self.frames.shape[2:]), self.frames.dtype)
        )
        obs, final = stacks.rebuild(
            self.frames[: t + 1], self.history, self.terminated[:t] | self.truncated[:t], finals, self.truncated[:t]
        )
        self.whole = np.empty((self.steps + 1, *obs.shape[1:]), obs.dtype)
        self.whole[: t + 1] = obs
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
