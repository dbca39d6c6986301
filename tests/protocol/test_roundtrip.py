"""Every message kind survives to_frames() -> bytes -> from_frames() unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tandem.protocol import MESSAGE_TYPES, ProtocolError, TransitionBatch, WeightBlob, decode
from tandem.protocol.framing import ALLOWED_DTYPES
from tests.protocol import samples


def as_bytes(frames):
    return [bytes(f) for f in frames]


def assert_same(a, b):
    assert type(a) is type(b)
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f.name
        elif isinstance(x, dict) and x and isinstance(next(iter(x.values())), np.ndarray):
            assert list(x) == list(y), f.name
            for key in x:
                assert x[key].dtype == y[key].dtype and np.array_equal(x[key], y[key]), f"{f.name}.{key}"
        else:
            assert x == y, f.name


@pytest.mark.parametrize("message", samples.every_kind(), ids=lambda m: m.KIND)
def test_every_kind_round_trips(message):
    frames = as_bytes(message.to_frames())
    assert_same(message, type(message).from_frames(frames))
    assert_same(message, decode(frames))


def test_every_kind_is_registered():
    assert set(MESSAGE_TYPES) == {type(m).KIND for m in samples.every_kind()}


@pytest.mark.parametrize("steps,envs", [(0, 0), (0, 4), (3, 0)])
def test_empty_batches_round_trip(steps, envs):
    batch = samples.unroll(steps=steps, envs=envs)
    back = TransitionBatch.from_frames(as_bytes(batch.to_frames()))
    assert back.num_transitions == 0
    assert back.obs.shape == (steps + 1, envs, 4)
    assert_same(batch, back)


@pytest.mark.parametrize("dtype", sorted(ALLOWED_DTYPES))
def test_every_allowed_dtype_round_trips_in_observations_and_weights(dtype):
    batch = samples.unroll(obs_dtype=dtype, ends=[(0, 1, "truncated")])
    assert_same(batch, TransitionBatch.from_frames(as_bytes(batch.to_frames())))
    arr = (np.arange(24) % 2).astype(dtype).reshape(2, 3, 4)
    blob = WeightBlob.build("p", 1, 1, {"w": arr})
    back = WeightBlob.from_frames(as_bytes(blob.to_frames()))
    back.verify_checksum()
    assert back.tensors["w"].dtype.str == dtype and np.array_equal(back.tensors["w"], arr)


@pytest.mark.parametrize(
    "ends",
    [
        [],
        [(0, 0, "terminated")],
        [(4, 2, "truncated")],
        [(0, 0, "truncated"), (0, 1, "truncated"), (2, 1, "terminated"), (4, 1, "truncated"), (3, 2, "truncated")],
        [(t, k, "truncated" if (t + k) % 2 else "terminated") for t in range(5) for k in range(3)],
    ],
)
def test_episode_boundaries_survive(ends):
    batch = samples.unroll(steps=5, envs=3, ends=ends)
    back = TransitionBatch.from_frames(as_bytes(batch.to_frames()))
    assert_same(batch, back)
    # final_obs rows follow the truncated flags in (t, k) order.
    truncated_at = [tuple(ix) for ix in np.argwhere(back.truncated)]
    assert truncated_at == sorted((t, k) for t, k, how in ends if how == "truncated")
    assert back.final_obs.shape[0] == len(truncated_at)


def test_big_endian_arrays_are_sent_little_endian():
    tensors = {"w": np.arange(6, dtype=">f4").reshape(2, 3)}
    back = WeightBlob.from_frames(as_bytes(WeightBlob.build("p", 1, 0, tensors).to_frames()))
    assert back.tensors["w"].dtype.str == "<f4"
    assert np.array_equal(back.tensors["w"], tensors["w"])


def test_weight_checksum_detects_a_flipped_byte():
    frames = as_bytes(samples.blob().to_frames())
    broken = bytearray(frames[1])
    broken[5] ^= 0x01
    blob = WeightBlob.from_frames([frames[0], bytes(broken), *frames[2:]])
    with pytest.raises(ProtocolError, match="checksum"):
        blob.verify_checksum()


def test_inconsistent_batches_are_refused_when_sending():
    good = samples.unroll(ends=[(1, 1, "truncated")])
    with pytest.raises(ProtocolError, match="final_obs"):
        dataclasses.replace(good, final_obs=good.final_obs[:0]).to_frames()
    with pytest.raises(ProtocolError, match="obs"):
        dataclasses.replace(good, obs=good.obs[:-1]).to_frames()
    with pytest.raises(ProtocolError, match="not allowed"):
        dataclasses.replace(good, actions=good.actions.astype(object)).to_frames()
