"""Frame stacks sent once (PROTOCOL.md 2.1.2): cut and rebuilt exactly, and malformed stacked batches refused."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import msgpack
import numpy as np
import pytest

from tandem.protocol import ProtocolError, TransitionBatch, stacks
from tests.frame_envs import STACK, Actor, Tagged


def wire(batch: TransitionBatch) -> list[bytes]:
    return [bytes(f) for f in batch.to_frames()]


@pytest.mark.parametrize("end_prob", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("steps", [0, 1, 2, 3, 4, 7])
def test_stacks_rebuild_exactly_across_episode_ends_and_truncation(steps, end_prob):
    """Episodes of every length (1-step ones at 0.9), unrolls shorter and longer than the stack."""
    actor = Actor(3, seed=steps, end_prob=end_prob)
    for _ in range(12):
        batch = actor.unroll(steps)
        packed = stacks.pack(batch, STACK)
        assert packed is not None
        assert packed.obs.shape == (steps + 1, 3, 3) and packed.obs_history.shape == (3, STACK - 1, 3)
        assert packed.final_obs.shape == (int(batch.truncated.sum()), 3)
        back = stacks.unpack(TransitionBatch.from_frames(wire(packed)))
        np.testing.assert_array_equal(back.obs, batch.obs)
        np.testing.assert_array_equal(back.final_obs, batch.final_obs)
        assert back.obs_stack == 1 and back.obs_history is None


def test_the_padding_rule_is_gymnasiums():
    """FrameStackObservation (padding 'reset') repeats an episode's first frame: what rebuild assumes."""
    env = gym.wrappers.FrameStackObservation(Tagged(5, 0, end_prob=0.0), STACK)
    first, _ = env.reset()
    assert [tuple(f) for f in first] == [(5, 1, 0)] * STACK
    obs, *_ = env.step(0)
    obs, *_ = env.step(0)
    assert [tuple(f) for f in obs] == [(5, 1, 0), (5, 1, 0), (5, 1, 1), (5, 1, 2)]


def test_stacks_of_another_rule_are_not_cut():
    batch = Actor(2, seed=1).unroll(5)
    zero_padded = batch.obs.copy()
    zero_padded[1, 0, 0] = 0  # as padding_type="zero" would make a young episode's stack (obs[0]'s is sent as is)
    assert stacks.pack(dataclasses.replace(batch, obs=zero_padded), STACK) is None
    assert stacks.pack(batch, STACK + 1) is None  # the stack size must match the observations
    final = batch.final_obs.copy()
    if len(final):
        final[0, 0] += 1
        assert stacks.pack(dataclasses.replace(batch, final_obs=final), STACK) is None


def test_an_unstacked_batch_is_sent_as_before():
    batch = Actor(2, seed=2).unroll(3)
    header = msgpack.unpackb(wire(batch)[0])
    assert "obs_stack" not in header and [a["name"] for a in header["arrays"]] == [
        "obs",
        "actions",
        "rewards",
        "terminated",
        "truncated",
        "final_obs",
    ]
    assert stacks.unpack(batch) is batch


def tamper(batch: TransitionBatch, edit) -> list[bytes]:
    """The frames of `batch` after `edit(header, arrays)` changes the header map and the {name: array} dict."""
    frames = wire(batch)
    header = msgpack.unpackb(frames[0])
    arrays = {d["name"]: (d, f) for d, f in zip(header["arrays"], frames[1:])}
    edit(header, arrays)
    header["arrays"] = [d for d, _ in arrays.values()]
    return [msgpack.packb(header)] + [f for _, f in arrays.values()]


def set_history(arrays, array: np.ndarray) -> None:
    arrays["obs_history"] = (
        {"name": "obs_history", "dtype": array.dtype.str, "shape": list(array.shape)},
        array.tobytes(),
    )


BAD = {
    "obs_stack a string": lambda h, a: h.update(obs_stack="4"),
    "obs_stack a bool": lambda h, a: h.update(obs_stack=True),
    "obs_stack 0": lambda h, a: h.update(obs_stack=0),
    "obs_stack negative": lambda h, a: h.update(obs_stack=-4),
    "obs_stack too large": lambda h, a: h.update(obs_stack=65),
    "history missing": lambda h, a: a.pop("obs_history"),
    "history with obs_stack 1": lambda h, a: h.update(obs_stack=1),
    "history too short": lambda h, a: set_history(a, np.zeros((2, STACK - 2, 3), np.int64)),
    "history for other envs": lambda h, a: set_history(a, np.zeros((3, STACK - 1, 3), np.int64)),
    "history of another frame": lambda h, a: set_history(a, np.zeros((2, STACK - 1, 4), np.int64)),
    "history of another dtype": lambda h, a: set_history(a, np.zeros((2, STACK - 1, 3), np.int32)),
}


@pytest.mark.parametrize("what", list(BAD))
def test_malformed_stacked_batches_are_refused_naming_the_field(what):
    packed = stacks.pack(Actor(2, seed=3).unroll(4), STACK)
    TransitionBatch.from_frames(tamper(packed, lambda h, a: None))  # untouched: fine
    with pytest.raises(ProtocolError) as err:
        TransitionBatch.from_frames(tamper(packed, BAD[what]))
    assert err.value.field in ("obs_stack", "obs_history")


def rebuilds_exactly(batch: TransitionBatch) -> bool:
    """The definition pack's cheaper check must agree with: cut, rebuild, compare."""
    obs, final = stacks.rebuild(
        batch.obs[:, :, -1],
        batch.obs[0, :, :-1],
        batch.terminated | batch.truncated,
        batch.final_obs[:, -1],
        batch.truncated,
    )
    return np.array_equal(obs, batch.obs) and np.array_equal(final, batch.final_obs)


@pytest.mark.parametrize("seed", range(6))
def test_pack_refuses_exactly_the_stacks_that_would_not_rebuild(seed):
    """One value changed anywhere (an older frame of an observation or of a final observation): pack cuts the
    batch to frames if and only if rebuilding still gives it back (the newest frames are always sent)."""
    rng = np.random.default_rng(seed)
    actor = Actor(3, seed=seed, end_prob=0.4)
    refused = 0
    for _ in range(40):
        batch = actor.unroll(int(rng.integers(1, 7)))
        assert stacks.pack(batch, STACK) is not None
        obs, final = batch.obs.copy(), batch.final_obs.copy()
        if len(final) and rng.random() < 0.3:
            final[rng.integers(len(final)), rng.integers(STACK), rng.integers(3)] += 1
        else:
            obs[rng.integers(len(obs)), rng.integers(3), rng.integers(STACK), rng.integers(3)] += 1
        changed = dataclasses.replace(batch, obs=obs, final_obs=final)
        packed = stacks.pack(changed, STACK)
        assert (packed is not None) == rebuilds_exactly(changed)
        refused += packed is None
    assert refused > 20  # most changes break a stack; the ones that do not were in obs[0] or a newest frame
