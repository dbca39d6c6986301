"""Turns actor unrolls into n-step transitions, carrying unfinished windows across consecutive batches."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from tandem.protocol.transitions import TransitionBatch

RETIRED_KEYS_KEPT = 1024  # old (actor, incarnation) pairs remembered so late batches cannot evict the new one


@dataclass(frozen=True, eq=False)
class NStepTransitions:
    """E transitions, each summing m <= n rewards of one episode (see SampledBatch for the meaning)."""

    obs: np.ndarray  # [E, *obs_shape], the batch's obs dtype
    actions: np.ndarray  # [E, *action_shape], the batch's action dtype
    returns: np.ndarray  # [E] float32: sum over i < m of gamma**i * r[t+i]
    next_obs: np.ndarray  # [E, *obs_shape]: observation after step t+m-1 (final_obs where truncated; see add)
    discounts: np.ndarray  # [E] float32: gamma**m, or 0 where the episode terminated within the window
    versions: np.ndarray  # [E] int64: policy_version of the batch that took step t

    def __len__(self) -> int:
        return int(self.returns.shape[0])


@dataclass
class _Carry:
    """The last c <= n-1 steps of one (actor, incarnation), all K envs, with which starts still await a window."""

    next_seq: int
    obs: np.ndarray  # [c, K, *obs_shape]: obs before each carried step; the next batch's obs[0] follows
    actions: np.ndarray  # [c, K, *action_shape]
    rewards: np.ndarray  # [c, K] float64
    done: np.ndarray  # [c, K] bool: terminated or truncated
    versions: np.ndarray  # [c] int64
    pending: np.ndarray  # [c, K] bool: a window starting here has not been emitted yet

    @property
    def num_envs(self) -> int:
        return int(self.pending.shape[1])


class NStepAccumulator:
    """Per stream (actor_id, incarnation, env k), n-step windows that never cross an episode boundary.

    The learner calls it like this:

        for batch in received_batches:
            replay.add(nstep.add(batch))

    A window starting at step t covers m = n steps, or fewer where its episode ends first; it is emitted
    as soon as it is complete. At a terminated step its discount is 0 (and next_obs, then unused, repeats
    the episode's last observation, so no transition ever holds two episodes); at a truncated step it
    bootstraps from that episode's `final_obs` row with gamma**m. Windows still open at the end of a batch wait for
    the batch with the next `seq`; a lost batch, a new incarnation or an LRU eviction discards them and
    adds their number to `discarded`.
    """

    def __init__(self, n: int, gamma: float, max_streams: int = 4096) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if max_streams < 1:
            raise ValueError(f"max_streams must be >= 1, got {max_streams}")
        self.n = n
        self.gamma = float(gamma)
        self.max_streams = max_streams
        self.discarded = 0  # partial windows thrown away (seq gap, new incarnation, eviction, stale batch)
        self.evicted_streams = 0
        # One entry per (actor_id, incarnation) holding its K streams: a batch always touches all K at once,
        # so per-actor recency is per-stream recency and the arithmetic stays vectorised over K.
        self._carries: OrderedDict[tuple[str, int], _Carry] = OrderedDict()
        self._num_streams = 0  # sum of K over _carries, kept up to date so add() never walks them all
        # Latest incarnation per actor name, outliving eviction so that a restart is still recognised;
        # bounded (LRU) only against a flood of names.
        self._incarnation: OrderedDict[str, int] = OrderedDict()
        self._retired: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._powers = self.gamma ** np.arange(n + 1)
        self._powers32 = self._powers.astype(np.float32)

    @property
    def num_streams(self) -> int:
        return self._num_streams

    @property
    def num_pending(self) -> int:
        """Windows waiting for the next batch of their stream."""
        return sum(int(np.count_nonzero(carry.pending)) for carry in self._carries.values())

    def add(self, batch: TransitionBatch) -> NStepTransitions:
        """Emit every window that `batch` completes; remember the open ones for the next batch."""
        key = (batch.actor_id, batch.incarnation)
        if key in self._retired:
            # A late batch from before a restart: use what it holds alone, keep no state for it.
            out, carry = self._process(None, batch)
            self.discarded += int(np.count_nonzero(carry.pending))
            return out
        current = self._incarnation.get(batch.actor_id)
        if current is not None and current != batch.incarnation:
            self._retire((batch.actor_id, current))
        self._incarnation[batch.actor_id] = batch.incarnation
        self._incarnation.move_to_end(batch.actor_id)
        if len(self._incarnation) > self.max_streams + RETIRED_KEYS_KEPT:
            self._incarnation.popitem(last=False)
        carry = self._carries.pop(key, None)
        if carry is not None:
            self._num_streams -= carry.num_envs
            if not self._continues(carry, batch):
                self.discarded += int(np.count_nonzero(carry.pending))
                carry = None  # the stream restarts from this batch's obs[0]
        out, new_carry = self._process(carry, batch)
        self._carries[key] = new_carry  # (re)inserted last: the most recently used
        self._num_streams += new_carry.num_envs
        self._evict()
        return out

    def _continues(self, carry: _Carry, batch: TransitionBatch) -> bool:
        return (
            batch.seq == carry.next_seq
            and carry.num_envs == batch.num_envs
            and carry.obs.shape[2:] == batch.obs.shape[2:]
            and carry.obs.dtype == batch.obs.dtype
            and carry.actions.shape[2:] == batch.actions.shape[2:]
            and carry.actions.dtype == batch.actions.dtype
        )

    def _retire(self, key: tuple[str, int]) -> None:
        carry = self._carries.pop(key, None)
        if carry is not None:
            self._num_streams -= carry.num_envs
            self.discarded += int(np.count_nonzero(carry.pending))
        self._retired[key] = None
        while len(self._retired) > RETIRED_KEYS_KEPT:
            self._retired.popitem(last=False)

    def _evict(self) -> None:
        # The group just used (the last one) is never evicted, even if its K alone exceeds max_streams.
        while self._num_streams > self.max_streams and len(self._carries) > 1:
            _, carry = self._carries.popitem(last=False)
            self._num_streams -= carry.num_envs
            self.discarded += int(np.count_nonzero(carry.pending))
            self.evicted_streams += carry.num_envs

    def _process(self, carry: _Carry | None, batch: TransitionBatch) -> tuple[NStepTransitions, _Carry]:
        n, steps, envs = self.n, batch.num_steps, batch.num_envs
        rewards = batch.rewards.astype(np.float64)
        done = batch.terminated | batch.truncated
        versions = np.full(steps, batch.policy_version, np.int64)
        actions, pending = batch.actions, np.ones((steps, envs), bool)
        c = 0 if carry is None else carry.obs.shape[0]
        if carry is not None:
            # Only the small per-step columns are joined; observations, the bulk, are gathered from
            # carry and batch separately so each is copied once, straight into the output.
            actions = np.concatenate([carry.actions, actions])
            rewards = np.concatenate([carry.rewards, rewards])
            done = np.concatenate([carry.done, done])
            versions = np.concatenate([carry.versions, versions])
            pending = np.concatenate([carry.pending, pending])
        length = c + steps  # steps carried + steps new; the batch's obs[0] is the obs after the last carried one

        # The window from s takes m = min(n, steps left, steps to its episode's end) steps; it has ended when its
        # last step is that end. n passes over [length, K] (n is small) find each start's first end within n
        # steps: cheaper than locating every step's next episode end.
        first_end = np.full((length, envs), n + 1, np.int64)  # n + 1: no episode end within n steps
        for i in range(min(n, length) - 1, -1, -1):  # from the far step back, so the nearest end wins
            np.copyto(first_end[: length - i], i + 1, where=done[i:])
        m = np.minimum(first_end, n)
        for left in range(1, min(n, length + 1)):  # the last n-1 starts also stop at the batch's end
            np.minimum(m[length - left], left, out=m[length - left])
        emit = pending & ((m == n) | (first_end == m))

        # Flat row-major indices (s * K + k) so every gather is a 1-D take; starts in the carry come first.
        flat = np.flatnonzero(emit)
        s_idx = flat // envs
        m_e = m.reshape(-1).take(flat)
        # Discounted sums of every start's window, masked past its m, then the emitted ones.
        sums = rewards.copy()
        for i in range(1, min(n, length)):
            sums[: length - i] += np.where(m[: length - i] > i, self._powers[i] * rewards[i:], 0.0)
        returns = sums.reshape(-1).take(flat)
        # An emitted window always ends inside this batch: an open carried start has no episode end after
        # it in the carry, and c <= n-1 means a full window reaches the batch. So its last step is >= 0.
        last_flat = flat + (m_e - 1 - c) * envs  # last_b * K + k
        term_e, trunc_e = batch.terminated.reshape(-1).take(last_flat), batch.truncated.reshape(-1).take(last_flat)
        # After an episode's last step obs[t+1] is the next episode's first observation, never a next_obs:
        # a truncated window takes the episode's final_obs row (also when terminated too); a terminated one,
        # whose discount 0 makes next_obs unused, repeats the last observation the episode showed.
        flat_obs = batch.obs.reshape(((steps + 1) * envs, *batch.obs.shape[2:]))
        next_flat = last_flat + envs
        ended_terminal = term_e & ~trunc_e
        if ended_terminal.any():
            next_flat[ended_terminal] -= envs
        next_obs = np.take(flat_obs, next_flat, axis=0)
        if trunc_e.any():
            # final_obs row of each truncated (t, k) is its rank in row-major order (PROTOCOL.md 2.1).
            rows = np.searchsorted(np.flatnonzero(batch.truncated), last_flat[trunc_e])
            next_obs[trunc_e] = batch.final_obs[rows]
        obs = np.empty_like(next_obs)
        split = int(np.searchsorted(flat, c * envs))
        if split:
            obs[:split] = carry.obs[s_idx[:split], flat[:split] - s_idx[:split] * envs]
        np.take(flat_obs, flat[split:] - c * envs, axis=0, out=obs[split:], mode="clip")
        discounts = self._powers32.take(m_e)
        discounts[term_e] = 0.0
        out = NStepTransitions(
            obs=obs,
            actions=actions.reshape((length * envs, *actions.shape[2:])).take(flat, axis=0),
            returns=returns.astype(np.float32),
            next_obs=next_obs,
            discounts=discounts,
            versions=versions[s_idx],
        )

        # Keep the last min(n-1, length) steps: every start still open lies there (older ones are complete).
        keep = min(n - 1, length)
        lo = length - keep
        if keep <= steps:
            carry_obs = batch.obs[steps - keep : steps].copy()  # a copy: the carry must not pin the whole batch
        else:
            carry_obs = np.concatenate([carry.obs[c - (keep - steps) :], batch.obs[:steps]])
        new_carry = _Carry(
            next_seq=batch.seq + 1,
            obs=carry_obs,
            actions=actions[lo:].copy(),
            rewards=rewards[lo:].copy(),
            done=done[lo:].copy(),
            versions=versions[lo:].copy(),
            pending=(pending & ~emit)[lo:].copy(),
        )
        return out, new_carry
