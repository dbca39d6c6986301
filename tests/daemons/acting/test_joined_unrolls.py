"""Joined unrolls: one message for consecutive unrolls of a stream trains exactly as the unrolls one by one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tandem.daemons.acting.backlog import JoiningBacklog
from tandem.daemons.replay import FrameReplay, NStepAccumulator
from tandem.protocol import TransitionBatch, stacks
from tandem.protocol.joining import join_unrolls, joinable
from tests import frame_envs
from tests.protocol import samples

ENDS = [(1, 0, "terminated"), (3, 2, "truncated"), (6, 1, "truncated"), (9, 0, "truncated"), (10, 2, "terminated")]


def long_unroll() -> TransitionBatch:
    batch = samples.unroll(steps=12, envs=3, ends=ENDS, extras=True)
    return dataclasses.replace(batch, policy_version=5)


def cut(batch: TransitionBatch, lo: int, hi: int, seq: int) -> TransitionBatch:
    """Steps lo..hi-1 as their own unroll, as an actor would have sent them."""
    rows_before = int(batch.truncated[:lo].sum())
    rows = int(batch.truncated[lo:hi].sum())
    return dataclasses.replace(
        batch,
        seq=seq,
        obs=batch.obs[lo : hi + 1],
        actions=batch.actions[lo:hi],
        rewards=batch.rewards[lo:hi],
        terminated=batch.terminated[lo:hi],
        truncated=batch.truncated[lo:hi],
        final_obs=batch.final_obs[rows_before : rows_before + rows],
        extras={n: a[lo:hi] for n, a in batch.extras.items()},
    )


def pieces() -> list[TransitionBatch]:
    whole = long_unroll()
    return [cut(whole, lo, lo + 4, seq) for seq, lo in enumerate((0, 4, 8))]


def rows(transitions) -> np.ndarray:
    """Every n-step transition as one row, sorted: the order windows come out in is not the point."""
    table = np.column_stack(
        [
            transitions.obs.reshape(len(transitions), -1),
            transitions.next_obs.reshape(len(transitions), -1),
            transitions.actions,
            transitions.returns,
            transitions.discounts,
            transitions.versions,
        ]
    )
    return table[np.lexsort(table.T[::-1])]


def test_joining_consecutive_unrolls_gives_back_the_long_unroll():
    parts = pieces()
    assert all(joinable(a, b) for a, b in zip(parts, parts[1:]))
    joined = join_unrolls(parts)
    whole = long_unroll()
    for name in ("obs", "actions", "rewards", "terminated", "truncated", "final_obs"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name))
    np.testing.assert_array_equal(joined.extras["logits"], whole.extras["logits"])
    assert joined.seq == 0 and joined.num_steps == 12
    TransitionBatch.from_frames(joined.to_frames())  # a valid message


def test_a_joined_message_gives_the_same_n_step_transitions_as_its_unrolls():
    parts = pieces()
    one_by_one, joined = NStepAccumulator(3, 0.9), NStepAccumulator(3, 0.9)
    separate = [one_by_one.add(p) for p in parts]
    first = joined.add(join_unrolls(parts[:2]))
    second = joined.add(dataclasses.replace(parts[2], seq=1))  # the next message of the stream
    expected = np.concatenate([rows(t) for t in separate])
    got = np.concatenate([rows(first), rows(second)])
    np.testing.assert_array_equal(rows_sorted(got), rows_sorted(expected))
    assert joined.discarded == one_by_one.discarded == 0


def rows_sorted(table: np.ndarray) -> np.ndarray:
    return table[np.lexsort(table.T[::-1])]


def test_unrolls_of_other_versions_or_streams_are_not_joined():
    a, b, _ = pieces()
    assert not joinable(a, dataclasses.replace(b, policy_version=6))
    assert not joinable(a, dataclasses.replace(b, actor_id="actor-9"))
    assert not joinable(a, dataclasses.replace(b, seq=2))
    assert not joinable(a, dataclasses.replace(b, obs=b.obs + 1))


def test_the_backlog_joins_what_waits_and_numbers_messages_with_gaps_kept():
    whole = samples.unroll(steps=20, envs=3)
    parts = [cut(dataclasses.replace(whole, policy_version=0), 4 * i, 4 * i + 4, i) for i in range(5)]
    backlog = JoiningBacklog(max_batches=2, max_join=2)
    sent: list[TransitionBatch] = []

    def send(frames) -> bool:
        sent.append(TransitionBatch.from_frames(frames))
        return True

    backlog.push(parts[0])
    backlog.push(parts[1])
    assert backlog.flush(send) == 2
    for part in parts[2:]:
        backlog.push(part)  # parts[2] is dropped: the backlog holds two
    assert backlog.dropped == 1
    assert backlog.flush(send) == 2
    assert [(m.seq, m.num_steps) for m in sent] == [(0, 8), (2, 8)]  # seq 1 is missing: unrolls were lost
    assert backlog.sent == 4 and backlog.messages == 2
    nstep = NStepAccumulator(3, 0.9)
    nstep.add(sent[0])
    nstep.add(sent[1])
    assert nstep.discarded > 0  # the learner saw the gap


def test_nothing_is_encoded_while_the_socket_would_not_take_it():
    backlog = JoiningBacklog(max_batches=4, max_join=4)
    backlog.push(pieces()[0])
    assert backlog.flush(lambda frames: True, writable=lambda: False) == 0 and len(backlog) == 1


def frame_rows(replay: FrameReplay) -> list[tuple]:
    cols = replay.gather(replay.live_slots())
    return sorted(
        (
            cols["obs"][i].tobytes(),
            int(cols["actions"][i]),
            round(float(cols["returns"][i]), 5),
            cols["next_obs"][i].tobytes(),
            round(float(cols["discounts"][i]), 5),
        )
        for i in range(len(cols["returns"]))
    )


@pytest.mark.parametrize("seed", range(3))
def test_frame_stacked_unrolls_join_as_frames_and_train_the_same(seed):
    """Unrolls cut to frames (PROTOCOL.md 2.1.2), joined by the backlog, rebuild to the whole stacks and fill a
    frame replay exactly as the unrolls sent one by one do, across episode ends and truncations."""
    actor, rng = frame_envs.Actor(3, seed=seed, end_prob=0.4), np.random.default_rng(seed)
    whole = [dataclasses.replace(actor.unroll(int(rng.integers(1, 6))), policy_version=2) for _ in range(12)]
    packed = [stacks.pack(b, frame_envs.STACK) for b in whole]
    assert all(joinable(a, b) for a, b in zip(packed, packed[1:]))
    backlog = JoiningBacklog(16, max_join=4)
    for p in packed:
        backlog.push(p)
    messages = []
    backlog.flush(lambda frames: messages.append(TransitionBatch.from_frames([bytes(f) for f in frames])) or True)
    assert len(messages) == 3 and [m.seq for m in messages] == [0, 1, 2]
    for m, group in zip(messages, (whole[0:4], whole[4:8], whole[8:12])):
        np.testing.assert_array_equal(stacks.unpack(m).obs, join_unrolls(group).obs)
    joined, one_by_one = (FrameReplay(10_000, (frame_envs.STACK, 3), np.int64, (), np.int64, 3, 0.9) for _ in range(2))
    for m in messages:
        joined.add(m)
    for p in packed:
        one_by_one.add(p)
    assert len(joined) == len(one_by_one) > 0 and frame_rows(joined) == frame_rows(one_by_one)


def test_stacked_unrolls_whose_history_does_not_follow_are_not_joined():
    actor = frame_envs.Actor(2, seed=7, end_prob=0.0)
    a, b = (stacks.pack(dataclasses.replace(actor.unroll(3), policy_version=0), frame_envs.STACK) for _ in range(2))
    assert joinable(a, b)
    assert not joinable(a, dataclasses.replace(b, obs_history=b.obs_history + 1))
    assert not joinable(a, stacks.unpack(b))  # one cut to frames, one whole


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("seed", range(3))
def test_an_actors_frame_rows_join_without_copying_and_rebuild_exactly(seed, checked):
    """Unrolls recorded as an actor records them (FrameUnrollBuilder over the stream's FrameRows) join as a view of
    their shared rows, and each message rebuilds exactly the whole stacks an identical actor's unrolls hold."""
    from functools import partial

    from tandem.daemons.acting.unroll import FrameRows, FrameUnrollBuilder

    mine, ref = (frame_envs.Actor(3, seed=seed, end_prob=0.15) for _ in range(2))
    builder = partial(FrameUnrollBuilder, checked=checked, rows=FrameRows(8))
    kept = [dataclasses.replace(mine.unroll(4, builder), policy_version=1) for _ in range(12)]
    whole = [dataclasses.replace(ref.unroll(4), policy_version=1) for _ in range(12)]
    assert all(k.obs_stack == frame_envs.STACK for k in kept)
    for i in (0, 4, 8):  # FrameRows(8): 8 unrolls a block, so each group of 4 lies in one
        assert join_unrolls(kept[i : i + 4]).obs.base is kept[i].obs.base is not None
    # where no episode started in an unroll's last S-1 steps, the next one's history is those very rows
    tail = slice(4 - frame_envs.STACK + 1, 4)
    in_rows = [stacks.same_memory(a.obs[tail].swapaxes(0, 1), b.obs_history) for a, b in zip(kept, kept[1:])]
    quiet = [not (a.terminated[tail] | a.truncated[tail]).any() for a in kept[:-1]]
    assert any(quiet) and [q and i % 8 != 7 for i, q in enumerate(quiet)] == in_rows
    backlog = JoiningBacklog(16, max_join=4)
    for k in kept:
        backlog.push(k)
    messages = []
    backlog.flush(lambda frames: messages.append(TransitionBatch.from_frames([bytes(f) for f in frames])) or True)
    assert len(messages) == 3
    for m, group in zip(messages, (whole[0:4], whole[4:8], whole[8:12])):
        ref_joined, got = join_unrolls(group), stacks.unpack(m)
        np.testing.assert_array_equal(got.obs, ref_joined.obs)
        np.testing.assert_array_equal(got.final_obs, ref_joined.final_obs)


@pytest.mark.parametrize("seed", range(4))
def test_continues_agrees_with_the_rebuilt_history(seed):
    """The in-place history check says what comparing with end_history says, for every episode-end pattern,
    and refuses a history with any one element changed."""
    actor, rng = frame_envs.Actor(4, seed=seed, end_prob=0.5), np.random.default_rng(seed)
    packed = [stacks.pack(actor.unroll(int(rng.integers(1, 7))), frame_envs.STACK) for _ in range(10)]
    for a, b in zip(packed, packed[1:]):
        assert stacks.continues(a, b) and np.array_equal(stacks.end_history(a), b.obs_history)
        bad = b.obs_history.copy()
        bad[tuple(rng.integers(0, n) for n in bad.shape)] += 1
        assert not stacks.continues(a, dataclasses.replace(b, obs_history=bad))


def test_rows_in_place_joins_only_consecutive_rows_of_one_array():
    from tandem.protocol.joining import rows_in_place

    block = np.arange(10 * 2 * 3, dtype=np.int32).reshape(10, 2, 3).copy()  # an array that owns its rows
    joined = rows_in_place([block[0:4], block[3:7], block[6:9]])
    assert joined.base is block and np.array_equal(joined, block[0:9])
    assert rows_in_place([block[0:4], block[4:7]]) is None  # not overlapping by the one shared row
    assert rows_in_place([block[0:4], np.array(block[3:7])]) is None  # a copy, not the block's rows
    view = block.view(np.float32)
    assert rows_in_place([view[0:4], view[3:7]]) is None  # another dtype over the same memory
    foreign = np.ndarray((4, 2, 3), np.int64, buffer=bytearray(4 * 2 * 3 * 8))
    assert rows_in_place([foreign, foreign]) is None  # a base that is not an array


def test_same_frames_compares_big_rows_bitwise():
    """Atari-sized rows (over 4 KiB) that are not the same memory are compared word by word."""
    from tandem.protocol.joining import same_frames

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (4, 84, 84), dtype=np.uint8)
    b = a.copy()
    assert same_frames(a, b) and same_frames(a, a)
    b[3, 83, 83] ^= 1
    assert not same_frames(a, b)
    f = np.zeros((2, 84, 84), np.float32)
    g = f.copy()
    g[1, 5, 5] = -0.0  # equal as numbers, not as the bytes that travel
    assert not same_frames(f, g)
