"""Frame replay: each frame stored once, stacks rebuilt exactly, and no stack ever read from a reused frame slot."""

from __future__ import annotations

import numpy as np
import pytest

from tandem.daemons.replay import FrameReplay, NStepAccumulator, ReplayBuffer
from tandem.protocol import stacks
from tests.frame_envs import STACK, Actor

N, GAMMA = 3, 0.9
FRAME = (3,)


def frame_replay(capacity: int, prioritized: bool = False, **kw) -> FrameReplay:
    return FrameReplay(capacity, (STACK, *FRAME), np.int64, (), np.int64, N, GAMMA, prioritized=prioritized, **kw)


def reference_replay(capacity: int) -> tuple[ReplayBuffer, NStepAccumulator]:
    return ReplayBuffer(capacity, (STACK, *FRAME), np.int64, (), np.int64), NStepAccumulator(N, GAMMA)


def rows_of(replay, slots=None) -> list[tuple]:
    """Every live transition as a hashable tuple (whole stacks included)."""
    cols = replay.gather(replay.live_slots() if slots is None else slots)
    return [
        (
            cols["obs"][i].tobytes(),
            int(cols["actions"][i]),
            round(float(cols["returns"][i]), 4),
            cols["next_obs"][i].tobytes(),
            round(float(cols["discounts"][i]), 5),
            int(cols["versions"][i]),
        )
        for i in range(len(cols["returns"]))
    ]


def is_a_stack(stack: np.ndarray) -> bool:
    """Frames of one (source, episode), steps t-3..t clamped at the episode's first frame, as the wrapper makes them."""
    newest = stack[-1]
    want = [(newest[0], newest[1], max(newest[2] - (STACK - 1 - i), 0)) for i in range(STACK)]
    return [tuple(f) for f in stack] == want


def traffic(seed: int, rounds: int):
    """Batches of three actors interleaved: unequal unroll lengths, a restart (new incarnation) and a lost batch."""
    fast, slow = Actor(3, seed, "actor-0"), Actor(2, seed + 1, "actor-1")
    other = Actor(1, seed + 2, "actor-2")
    for r in range(rounds):
        yield fast.unroll(5)
        yield fast.unroll(1 + r % 3)
        if r % 4 == 0:
            yield slow.unroll(4)  # rarely: its carried windows wait while the others fill the ring
        if r == rounds // 2:
            other = Actor(1, seed + 3, "actor-2", incarnation=1)  # restarted: new incarnation, new episodes
        batch = other.unroll(3)
        if r % 5 != 3:  # every fifth batch of actor-2 is lost: its stream restarts from the next one
            yield batch


@pytest.mark.parametrize("seed", range(4))
def test_frame_replay_holds_exactly_what_whole_stacks_would(seed):
    replay = frame_replay(100_000)
    ref, acc = reference_replay(100_000)
    for batch in traffic(seed, 24):
        packed = stacks.pack(batch, STACK)
        assert packed is not None
        replay.add(packed if seed % 2 else batch)  # a whole-stack batch is cut to frames on arrival
        ref.add(acc.add(batch))
    assert sorted(rows_of(replay)) == sorted(rows_of(ref))
    assert replay.dropped_overwritten == 0 and replay.nstep.discarded == acc.discarded
    # Each frame once: new frames, final frames, and obs[0]'s stack only where a stream (re)starts.
    assert replay.written < 1.2 * replay.total_added + STACK * 3 * 8
    sample = replay.sample(64)
    assert sample.obs.shape == (64, STACK, *FRAME) and sample.next_obs.shape == (64, STACK, *FRAME)
    assert all(is_a_stack(s) for s in sample.obs) and all(is_a_stack(s) for s in sample.next_obs)


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_reused_frame_slot_is_never_read(prioritized):
    """A frame ring far too small for its transitions: whatever survives must rebuild to stacks the env made."""
    replay = frame_replay(200, prioritized, frame_capacity=120)
    ref, acc = reference_replay(100_000)
    evicted = False
    for batch in traffic(7, 60):
        replay.add(stacks.pack(batch, STACK))
        ref.add(acc.add(batch))
        allowed = set(rows_of(ref))
        live = rows_of(replay)
        assert set(live) <= allowed
        evicted |= len(replay) < min(replay.total_added, replay.capacity)
        if len(replay):
            sample = replay.sample(128)
            assert set(rows_of(replay, sample.indices)) <= allowed
            assert set(sample.indices.tolist()) <= set(replay.live_slots().tolist())
            replay.update_priorities(np.arange(replay.capacity), np.ones(replay.capacity))  # evicted slots stay out
    assert replay.written > 5 * replay.frame_capacity and evicted
    assert replay.dropped_overwritten > 0  # the slow actor's carried windows lost their frames and were dropped


def test_whole_stacks_that_are_not_frame_stacks_are_counted_and_dropped():
    batch = Actor(2, 0).unroll(4)
    broken = batch.obs.copy()
    broken[2, 1, 0] += 1  # an older frame that is not what the frames before it said
    replay = frame_replay(100)
    assert replay.add(type(batch)(**{**batch.__dict__, "obs": broken})) == 0
    assert replay.batches_unstackable == 1 and len(replay) == 0


def test_state_dict_round_trip_keeps_frames_and_eviction_marks():
    replay, copy = frame_replay(150, True, frame_capacity=140), frame_replay(150, True, frame_capacity=140)
    batches = list(traffic(3, 16))
    for batch in batches[:-4]:
        replay.add(stacks.pack(batch, STACK))
    replay.update_priorities(replay.live_slots()[:5], np.arange(1.0, 6.0))
    state = replay.state_dict()
    assert all(isinstance(v, (np.ndarray, int)) for v in state.values())
    copy.load_state_dict({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()})
    a, b = replay.sample(32), copy.sample(32)
    for name in ("obs", "actions", "returns", "next_obs", "discounts", "versions", "indices", "weights"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for batch in batches[-4:]:  # new batches after a restart: their streams start afresh in the copy
        copy.add(stacks.pack(batch, STACK))
    assert all(is_a_stack(s) for s in copy.sample(256).obs)
    with pytest.raises(ValueError, match="frame capacity"):
        frame_replay(150, frame_capacity=141).load_state_dict(state)


def test_bytes_per_transition_is_a_frame_and_a_row():
    replay = FrameReplay(10_000, (4, 84, 84), np.uint8, (), np.int64, N, GAMMA)
    whole = ReplayBuffer(10_000, (4, 84, 84), np.uint8, (), np.int64)
    assert replay.bytes_per_transition() < 1.25 * 84 * 84 and 6 * replay.bytes_per_transition() < whole.row_bytes
