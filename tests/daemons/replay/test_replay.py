"""Replay: n-step windows against a brute-force reference, the ring, the sum-tree and both sampling modes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tandem.daemons.replay import NStepAccumulator, NStepTransitions, ReplayBuffer, SumTree
from tandem.protocol import TransitionBatch
from tests.protocol.samples import batch_of

GAMMA = 0.9


# ---------------------------------------------------------------------------------------------------------------
# An env simulator whose observations say exactly where they come from: obs = (episode id, step in episode).


class Episodes:
    """K envs stepped in unrolls of T; remembers every step so a reference can be computed by brute force."""

    def __init__(self, envs: int, seed: int, end_prob: float = 0.2, actor_id: str = "actor-0", incarnation: int = 1):
        self.rng = np.random.default_rng(seed)
        self.envs, self.end_prob = envs, end_prob
        self.actor_id, self.incarnation = actor_id, incarnation
        self.next_episode = envs
        self.episode = list(range(envs))
        self.step = [0] * envs
        self.seq = 0
        self.steps: list[list[dict]] = [[] for _ in range(envs)]  # per env, every step ever taken

    def header(self, version: int) -> dict:
        """The next unroll's header fields: this actor's, its next seq, `version`."""
        return {"actor": self.actor_id, "incarnation": self.incarnation, "seq": self.seq, "version": version}

    def _obs(self, k: int) -> tuple[int, int]:
        return (self.episode[k], self.step[k])

    def unroll(self, steps: int, ends: dict | None = None, version: int | None = None) -> TransitionBatch:
        """`ends` maps (t, k) to 'terminated', 'truncated' or 'both'; otherwise episodes end at random."""
        envs = self.envs
        version = self.seq if version is None else version
        obs = np.zeros((steps + 1, envs, 2), np.int64)
        actions = self.rng.integers(0, 4, (steps, envs)).astype(np.int64)
        rewards = self.rng.standard_normal((steps, envs)).astype(np.float32)
        terminated = np.zeros((steps, envs), bool)
        truncated = np.zeros((steps, envs), bool)
        final = []
        for t in range(steps):
            for k in range(envs):
                obs[t, k] = self._obs(k)
                if ends is not None:
                    how = ends.get((t, k))
                else:
                    draw = self.rng.random()
                    how = (
                        None
                        if draw >= self.end_prob
                        else ("terminated", "truncated", "both")[int(draw * 3 / self.end_prob)]
                    )
                term, trunc = how in ("terminated", "both"), how in ("truncated", "both")
                terminated[t, k], truncated[t, k] = term, trunc
                record = dict(
                    obs=self._obs(k),
                    action=int(actions[t, k]),
                    reward=float(rewards[t, k]),
                    term=term,
                    trunc=trunc,
                    version=version,
                )
                self.step[k] += 1
                if trunc:
                    final.append(self._obs(k))  # row order: row-major (t, k), as the protocol says
                record["after"] = self._obs(k)
                if term or trunc:
                    self.episode[k], self.step[k] = self.next_episode, 0
                    self.next_episode += 1
                self.steps[k].append(record)
        for k in range(envs):
            obs[steps, k] = self._obs(k)
        final_obs = np.array(final, np.int64).reshape(-1, 2)
        batch = batch_of(obs, actions, rewards, terminated, truncated, final_obs, **self.header(version), env_steps=0)
        batch.check_shapes()
        self.seq += 1
        return batch


def reference(history: list[list[dict]], n: int, gamma: float) -> dict[tuple, tuple]:
    """Every complete n-step window in `history`, brute force: obs -> (action, return, next_obs, discount, version)."""
    out = {}
    for steps in history:
        for p in range(len(steps)):
            ret, m, ended = 0.0, 0, False
            for i in range(n):
                if p + i >= len(steps):
                    break
                s = steps[p + i]
                ret += gamma**i * s["reward"]
                m += 1
                if s["term"] or s["trunc"]:
                    ended = True
                    break
            if m < n and not ended:
                continue  # still open: more data would extend it
            last = steps[p + m - 1]
            if last["term"] and not last["trunc"]:
                next_obs = last["obs"]  # the convention for terminated windows: repeat the last observation
            else:
                next_obs = last["after"]  # obs[t+1] inside the episode, or final_obs where truncated
            discount = 0.0 if last["term"] else gamma**m
            out[steps[p]["obs"]] = (steps[p]["action"], ret, next_obs, discount, steps[p]["version"])
    return out


def as_dict(parts: list[NStepTransitions]) -> dict[tuple, tuple]:
    out = {}
    for tr in parts:
        assert tr.returns.dtype == np.float32 and tr.discounts.dtype == np.float32 and tr.versions.dtype == np.int64
        for i in range(len(tr)):
            key = tuple(int(x) for x in tr.obs[i])
            assert key not in out, f"window starting at {key} emitted twice"
            out[key] = (
                int(tr.actions[i]),
                float(tr.returns[i]),
                tuple(int(x) for x in tr.next_obs[i]),
                float(tr.discounts[i]),
                int(tr.versions[i]),
            )
    return out


def assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys(), (
        f"missing {sorted(want.keys() - got.keys())[:5]}, extra {sorted(got.keys() - want.keys())[:5]}"
    )
    for key, (action, ret, next_obs, discount, version) in want.items():
        g = got[key]
        assert g[0] == action and g[2] == next_obs and g[4] == version, (key, g, want[key])
        assert g[1] == pytest.approx(ret, rel=1e-5, abs=1e-5), key
        assert g[3] == pytest.approx(discount, rel=1e-6), key


def never_crosses(tr: NStepTransitions) -> None:
    assert np.array_equal(tr.obs[:, 0], tr.next_obs[:, 0]), "a window paired two episodes"


# ---------------------------------------------------------------------------------------------------------------
# n-step


@pytest.mark.parametrize("seed", range(24))
def test_nstep_matches_brute_force_across_batches(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.choice([1, 2, 3, 5, 8]))
    steps = int(rng.choice([1, 2, 4, 7, 16]))
    envs = int(rng.choice([1, 3, 8]))
    batches = int(rng.integers(1, 5))
    sim = Episodes(envs, seed, end_prob=float(rng.choice([0.05, 0.2, 0.5])))
    acc = NStepAccumulator(n, GAMMA)
    parts = []
    for _ in range(batches):
        tr = acc.add(sim.unroll(steps))
        never_crosses(tr)
        parts.append(tr)
        # Everything complete so far is out already, and nothing that could still grow.
        assert_same(as_dict(parts), reference(sim.steps, n, GAMMA))
    assert acc.discarded == 0


def test_nstep_with_n_larger_than_three_batches():
    sim = Episodes(envs=2, seed=3)
    acc = NStepAccumulator(n=10, gamma=GAMMA)
    parts = [acc.add(sim.unroll(3, ends={})) for _ in range(3)]
    assert sum(len(p) for p in parts) == 0  # 9 steps, no ends: no window of 10 is complete yet
    assert acc.num_pending == 18
    parts.append(acc.add(sim.unroll(3, ends={(1, 0): "terminated", (2, 1): "truncated"})))
    got = as_dict(parts)
    assert_same(got, reference(sim.steps, 10, GAMMA))
    assert len(got) == 11 + 12  # env 0: starts 0..10 (window 0 is exactly 10 long); env 1: every start 0..11
    assert acc.num_pending == 1  # env 0's step 11, the only step after an episode end
    start = got[(0, 0)]
    assert start[1] == pytest.approx(sum(GAMMA**i * s["reward"] for i, s in enumerate(sim.steps[0][:10])), rel=1e-5)
    assert start[3] == pytest.approx(GAMMA**10)


def test_truncated_bootstraps_from_final_obs_and_terminated_has_zero_discount():
    sim = Episodes(envs=2, seed=0)
    batch = sim.unroll(5, ends={(1, 0): "truncated", (2, 1): "terminated"})
    tr = NStepAccumulator(n=3, gamma=0.5).add(batch)
    got = as_dict([tr])
    # env 0 truncated at step 1: windows from steps 0 and 1 end there and bootstrap from final_obs = (0, 2).
    assert got[(0, 0)][2:4] == ((0, 2), 0.25)
    assert got[(0, 1)][2:4] == ((0, 2), 0.5)
    assert np.array_equal(batch.final_obs, [[0, 2]])
    # env 1 terminated at step 2: discount 0 for all three windows that reach it.
    for step in range(3):
        assert got[(1, step)][3] == 0.0
    # The next episodes' first windows are complete (3 steps) from their step 0 only where 3 steps exist.
    assert (2, 0) in got and (3, 0) not in got
    never_crosses(tr)


def test_both_flags_set_counts_as_terminated():
    sim = Episodes(envs=1, seed=0)
    batch = sim.unroll(3, ends={(1, 0): "both"})
    assert batch.final_obs.shape == (1, 2)
    got = as_dict([NStepAccumulator(n=4, gamma=GAMMA).add(batch)])
    assert got[(0, 0)][3] == 0.0 and got[(0, 1)][3] == 0.0
    assert got[(0, 0)][2] == (0, 2)  # final_obs: still the same episode


def test_seq_gap_discards_partial_windows_and_restarts():
    sim = Episodes(envs=3, seed=1)
    acc = NStepAccumulator(n=4, gamma=GAMMA)
    acc.add(sim.unroll(5, ends={}))
    assert acc.num_pending == 9  # the last 3 steps of each env
    lost = sim.unroll(5, ends={})
    del lost
    tr = acc.add(sim.unroll(5, ends={}))
    assert acc.discarded == 9
    # The stream restarted at the new batch's obs[0]: its windows start at step 10 and none reach back.
    assert sorted(int(s) for s in tr.obs[:, 1]) == [10, 10, 10, 11, 11, 11]
    # A repeated seq is a gap too.
    sim.seq -= 1
    acc.add(sim.unroll(2, ends={}))
    assert acc.discarded == 18


def test_new_incarnation_replaces_streams_and_late_old_batches_do_not_evict_it():
    old = Episodes(envs=2, seed=1, incarnation=5)
    new = Episodes(envs=2, seed=2, incarnation=6)
    acc = NStepAccumulator(n=3, gamma=GAMMA)
    acc.add(old.unroll(4, ends={}))
    acc.add(new.unroll(4, ends={}))
    assert acc.discarded == 4 and acc.num_streams == 2
    late = acc.add(old.unroll(4, ends={}))  # reordered, from before the restart: used alone, kept nowhere
    assert len(late) == 4 and acc.discarded == 8 and acc.num_streams == 2
    tr = acc.add(new.unroll(4, ends={}))
    assert len(tr) == 8 and acc.discarded == 8  # the new stream kept its carry


def test_restart_after_eviction_is_still_recognised():
    acc = NStepAccumulator(n=3, gamma=GAMMA, max_streams=2)
    old_a = Episodes(envs=2, seed=1, actor_id="a", incarnation=1)
    new_a = Episodes(envs=2, seed=2, actor_id="a", incarnation=2)
    acc.add(old_a.unroll(4, ends={}))
    acc.add(Episodes(envs=2, seed=3, actor_id="b").unroll(4, ends={}))  # evicts a/1
    acc.add(new_a.unroll(4, ends={}))  # evicts b
    before = acc.discarded
    acc.add(old_a.unroll(4, ends={}))  # late, from before a's restart: must not replace a/2
    assert acc.discarded == before + 4
    assert len(acc.add(new_a.unroll(4, ends={}))) == 8  # a/2 kept its open windows


def test_lru_eviction_bounds_streams():
    acc = NStepAccumulator(n=3, gamma=GAMMA, max_streams=8)
    sims = [Episodes(envs=4, seed=i, actor_id=f"actor-{i}") for i in range(5)]
    for sim in sims:
        acc.add(sim.unroll(3, ends={}))
        assert acc.num_streams <= 8
    assert acc.evicted_streams == 12 and acc.discarded == 3 * 4 * 2
    acc.add(sims[3].unroll(3, ends={}))  # recently used: actor-4 is now the oldest
    acc.add(sims[0].unroll(3, ends={}))  # evicted before: starts over, evicts actor-4
    assert acc.evicted_streams == 16 and acc.num_streams == 8


def test_nstep_empty_batches_keep_the_stream():
    sim = Episodes(envs=2, seed=0)
    acc = NStepAccumulator(n=2, gamma=GAMMA)
    acc.add(sim.unroll(3, ends={}))
    assert len(acc.add(sim.unroll(0))) == 0
    tr = acc.add(sim.unroll(1, ends={}))
    assert len(tr) == 2 and acc.discarded == 0
    assert tr.obs.shape == (2, 2) and tr.next_obs.shape == (2, 2)
    assert_same(as_dict([tr]), {k: v for k, v in reference(sim.steps, 2, GAMMA).items() if k[1] == 2})


# ---------------------------------------------------------------------------------------------------------------
# sum-tree


@pytest.mark.parametrize("capacity", [1, 5, 16, 17, 64, 1000, 70_000])
def test_sumtree_matches_searchsorted(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    pri = rng.random(capacity) * (rng.random(capacity) > 0.3)  # some zeros, which must never be drawn
    pri[rng.integers(capacity)] = 0.5
    tree.update(np.arange(capacity), pri)
    assert tree.total == pytest.approx(pri.sum()) and tree.max_priority == pri.max()
    draws = tree.sample(512, np.random.default_rng(7))
    targets = (np.arange(512) + np.random.default_rng(7).random(512)) * (pri.sum() / 512)
    assert np.array_equal(draws, np.searchsorted(np.cumsum(pri), targets, side="right"))
    assert np.all(pri[draws] > 0)


def test_sumtree_updates_repeated_indices_last_wins_and_max_falls():
    tree = SumTree(6)
    tree.update([0, 1, 2], [5.0, 1.0, 1.0])
    tree.update([0, 0, 3], [9.0, 2.0, 1.0])
    assert tree.get([0, 3]).tolist() == [2.0, 1.0]
    assert tree.total == 5.0 and tree.max_priority == 2.0
    with pytest.raises(ValueError):
        tree.update([1], [np.nan])
    with pytest.raises(IndexError):
        tree.update([6], [1.0])
    with pytest.raises(ValueError):
        SumTree(3).sample(4, np.random.default_rng(0))


# ---------------------------------------------------------------------------------------------------------------
# ring buffer


def transitions(start: int, count: int, obs_dim: int = 3) -> NStepTransitions:
    """Transitions whose every column is its running number, so a slot says exactly which one it holds."""
    ids = np.arange(start, start + count)
    return NStepTransitions(
        obs=np.repeat(ids[:, None], obs_dim, 1).astype(np.float32),
        actions=ids.astype(np.int64),
        returns=ids.astype(np.float32),
        next_obs=np.repeat(ids[:, None] + 0.5, obs_dim, 1).astype(np.float32),
        discounts=np.full(count, 0.9, np.float32),
        versions=ids.astype(np.int64),
    )


def make_buffer(capacity: int, prioritized: bool = False, **kw) -> ReplayBuffer:
    return ReplayBuffer(capacity, (3,), np.float32, (), np.int64, prioritized=prioritized, **kw)


@pytest.mark.parametrize("prioritized", [False, True])
def test_ring_wraps_and_overwrites_the_oldest(prioritized):
    buf = make_buffer(5, prioritized)
    assert buf.add(transitions(0, 3)) == 3 and len(buf) == 3
    assert buf.add(transitions(3, 4)) == 4 and len(buf) == 5
    assert sorted(buf.state_dict()["actions"].tolist()) == [2, 3, 4, 5, 6]
    assert buf.state_dict()["actions"].tolist() == [5, 6, 2, 3, 4]  # slots 0,1 were overwritten by 5, 6
    assert buf.add(transitions(100, 12)) == 5  # more than capacity at once: only the newest fit
    state = buf.state_dict()
    assert sorted(state["actions"].tolist()) == [107, 108, 109, 110, 111]
    assert np.array_equal(state["obs"][:, 0], state["actions"]) and np.array_equal(state["returns"], state["actions"])
    batch = buf.sample(64)
    assert set(batch.actions.tolist()) <= {107, 108, 109, 110, 111}
    assert np.array_equal(batch.obs[:, 0], batch.actions) and np.array_equal(batch.next_obs[:, 0], batch.actions + 0.5)
    assert np.array_equal(batch.indices, [state["actions"].tolist().index(a) for a in batch.actions])
    assert batch.weights.dtype == np.float32 and batch.indices.dtype == np.int64


def test_uniform_sampling_covers_slots_equally():
    buf = make_buffer(10)
    buf.add(transitions(0, 10))
    counts = np.zeros(10)
    for _ in range(100):
        batch = buf.sample(200)
        np.add.at(counts, batch.indices, 1)
        assert np.all(batch.weights == 1.0)
    expected = counts.sum() / 10
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 27.9  # 99.9% quantile of chi-square with 9 degrees of freedom


def sample_frequencies(buf: ReplayBuffer, draws: int = 20000) -> np.ndarray:
    counts = np.zeros(len(buf))
    for _ in range(draws // 100):
        np.add.at(counts, buf.sample(100).indices, 1)
    return counts / draws


@pytest.mark.parametrize("alpha", [1.0, 0.6])
def test_prioritized_sampling_follows_priorities_to_the_alpha(alpha):
    buf = make_buffer(3, prioritized=True, alpha=alpha)
    buf.add(transitions(0, 3))
    assert np.allclose(sample_frequencies(buf, 3000), 1 / 3, atol=0.03)  # new slots: all at the max priority
    buf.update_priorities(np.arange(3), np.array([1.0, -2.0, 7.0]))  # a TD error's sign does not matter
    want = np.array([1.0, 2.0, 7.0]) ** alpha
    assert np.allclose(sample_frequencies(buf), want / want.sum(), atol=0.01)
    buf.update_priorities([0], [100.0])
    want[0] = 100.0**alpha
    assert np.allclose(sample_frequencies(buf), want / want.sum(), atol=0.01)


def test_importance_weights_and_new_slots_get_the_max_priority():
    buf = make_buffer(8, prioritized=True, alpha=0.5)
    buf.add(transitions(0, 4))
    buf.update_priorities(np.arange(4), [1.0, 4.0, 9.0, 16.0])
    buf.add(transitions(4, 1))  # slot 4 gets the largest priority present: 16
    p = (np.array([1.0, 4.0, 9.0, 16.0, 16.0]) + buf.eps) ** 0.5
    probs = p / p.sum()
    batch = buf.sample(64, beta=0.7)
    w = (5 * probs[batch.indices]) ** -0.7
    assert np.allclose(batch.weights, w / w.max(), rtol=1e-5)
    assert batch.weights.max() == 1.0
    assert np.allclose(sample_frequencies(buf), probs, atol=0.01)


def test_non_finite_priorities_are_ignored():
    buf = make_buffer(3, prioritized=True, alpha=1.0)
    buf.add(transitions(0, 3))
    buf.update_priorities([0, 1, 2], [1.0, 1.0, 2.0])
    buf.update_priorities([0, 1, 2], [np.nan, np.inf, 6.0])
    assert np.allclose(buf.state_dict()["priorities"], [1.0, 1.0, 6.0], atol=1e-5)
    buf.update_priorities([1], [1e300])  # huge but finite: clipped, the tree stays finite
    assert np.isfinite(buf.sample(8).weights).all()
    with pytest.raises(IndexError):
        buf.update_priorities([3], [1.0])
    make_buffer(3).update_priorities([0], [1.0])  # uniform replay: a no-op, so the learner loop need not care


@pytest.mark.parametrize("prioritized", [False, True])
def test_empty_buffer_refuses_to_sample(prioritized):
    with pytest.raises(ValueError, match="empty"):
        make_buffer(4, prioritized).sample(2)


@pytest.mark.parametrize("prioritized", [False, True])
def test_state_dict_round_trip(prioritized):
    buf = make_buffer(6, prioritized, seed=3)
    buf.add(transitions(0, 9))
    if prioritized:
        buf.update_priorities([0, 1, 2], [3.0, 0.1, 5.0])
    buf.sample(4)
    state = buf.state_dict()
    assert all(isinstance(v, (np.ndarray, int)) for v in state.values())
    copy = make_buffer(6, prioritized, seed=99)
    copy.load_state_dict({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()})
    a, b = buf.sample(16), copy.sample(16)
    for name in ("obs", "actions", "returns", "next_obs", "discounts", "versions", "indices", "weights"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    buf.add(transitions(50, 2))
    copy.add(transitions(50, 2))
    assert np.array_equal(buf.state_dict()["actions"], copy.state_dict()["actions"])
    with pytest.raises(ValueError, match="capacity"):
        make_buffer(7).load_state_dict(state)


def test_add_rejects_mismatched_columns_without_writing():
    buf = make_buffer(4)
    bad = transitions(0, 2, obs_dim=5)
    with pytest.raises(ValueError, match="obs"):
        buf.add(bad)
    assert len(buf) == 0 and not buf.state_dict()["actions"].size


def test_nstep_into_replay_end_to_end():
    sim = Episodes(envs=4, seed=5)
    acc = NStepAccumulator(n=3, gamma=GAMMA)
    buf = ReplayBuffer(1000, (2,), np.int64, (), np.int64, prioritized=True)
    for _ in range(5):
        buf.add(acc.add(sim.unroll(8)))
    batch = buf.sample(32)
    assert np.array_equal(batch.obs[:, 0], batch.next_obs[:, 0])
    want = reference(sim.steps, 3, GAMMA)
    for i in range(32):
        ref = want[tuple(int(x) for x in batch.obs[i])]
        assert batch.returns[i] == pytest.approx(ref[1], rel=1e-5, abs=1e-5) and batch.discounts[i] == pytest.approx(
            ref[3]
        )


def best_sample_s(buf: ReplayBuffer, rounds: int = 200, batch_size: int = 256) -> float:
    """The fastest of a few runs: other load on the host only ever adds time."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            buf.sample(batch_size)
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize("prioritized", [False, True])
def test_sampling_cost_does_not_grow_with_capacity(prioritized):
    """A sanity check against O(buffer) sampling (story 3), not the benchmark: 100x the slots, < 5x the time."""
    cost = {}
    for capacity in (10_000, 1_000_000):
        buf = ReplayBuffer(capacity, (4,), np.float32, (), np.int64, prioritized=prioritized)
        chunk = transitions(0, capacity, obs_dim=4)
        buf.add(chunk)
        if prioritized:
            buf.update_priorities(np.arange(capacity), np.random.default_rng(0).random(capacity))
        cost[capacity] = best_sample_s(buf)
    assert cost[1_000_000] < 5 * cost[10_000], cost
