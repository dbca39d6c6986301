"""Hostile input to from_frames(): only ProtocolError comes out, nothing is unpickled, nothing big is allocated."""

from __future__ import annotations

import pickle
import tracemalloc

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tandem.protocol import MESSAGE_TYPES, ProtocolError, decode
from tests.protocol import samples

VALID_FRAMES = [[bytes(f) for f in m.to_frames()] for m in samples.every_kind()]
DECODERS = [decode, *(cls.from_frames for cls in MESSAGE_TYPES.values())]
fuzz = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def only_protocol_errors(frames) -> None:
    """Every decoder either returns or raises ProtocolError, allocating little beyond the input."""
    size = sum(len(f) for f in frames if isinstance(f, (bytes, bytearray)))
    for decoder in DECODERS:
        tracemalloc.start()
        try:
            decoder(frames)
        except ProtocolError:
            pass
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert peak < 8 * size + (2 << 20), f"{decoder.__qualname__} allocated {peak} bytes for {size} input bytes"


@fuzz
@given(st.lists(st.binary(max_size=300), min_size=0, max_size=6))
def test_random_bytes(frames):
    only_protocol_errors(frames)


@fuzz
@given(st.sampled_from(VALID_FRAMES), st.integers(0, 8), st.lists(st.binary(max_size=64), max_size=3))
def test_truncated_and_extra_frames(frames, keep, extra):
    mutated = frames[:keep] + extra
    if mutated == frames:
        return
    only_protocol_errors(mutated)


@fuzz
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_mutated_headers(frames, data):
    header = msgpack.unpackb(frames[0], raw=False)
    key = data.draw(st.sampled_from(sorted(header)))
    if data.draw(st.booleans()):
        del header[key]
    else:
        header[key] = data.draw(msgpack_values)
    only_protocol_errors([msgpack.packb(header, use_bin_type=True), *frames[1:]])


@fuzz
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_truncated_and_bit_flipped_bytes(frames, data):
    index = data.draw(st.integers(0, len(frames) - 1))
    frame = bytearray(frames[index])
    if frame and data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] ^= 1 << data.draw(st.integers(0, 7))
    else:
        del frame[data.draw(st.integers(0, len(frame))) :]
    only_protocol_errors(frames[:index] + [bytes(frame)] + frames[index + 1 :])


def array_headers():
    header = msgpack.unpackb(VALID_FRAMES[1][0], raw=False)
    return header, VALID_FRAMES[1][1:]


@pytest.mark.parametrize(
    "shape", [[2**40, 2**40], [2**40] * 8, [2**31, 2**31, 4], [-1], [1.5], ["3"], [0, 2**40, 2**40], [1] * 9]
)
def test_huge_or_bad_declared_shapes_are_refused_without_allocating(shape):
    header, arrays = array_headers()
    header["arrays"][0]["shape"] = shape
    frames = [msgpack.packb(header, use_bin_type=True), *arrays]
    only_protocol_errors(frames)
    with pytest.raises(ProtocolError, match="arrays"):
        decode(frames)


@pytest.mark.parametrize(
    "dtype", ["|O", "O", "<V8", "[('a', '<f4')]", ">f4", "<M8[s]", "<U4", "|S4", "<c8", "float32", ""]
)
def test_forbidden_dtypes_are_named(dtype):
    header, arrays = array_headers()
    header["arrays"][0]["dtype"] = dtype
    with pytest.raises(ProtocolError, match=r"arrays\[0\]\.dtype"):
        decode([msgpack.packb(header, use_bin_type=True), *arrays])


@pytest.mark.parametrize("version", [0, 2, -1, "1", 1.0, None, True])
def test_wrong_versions_are_refused(version):
    for frames in VALID_FRAMES:
        header = msgpack.unpackb(frames[0], raw=False)
        header["v"] = version
        with pytest.raises(ProtocolError, match="^v: "):
            decode([msgpack.packb(header, use_bin_type=True), *frames[1:]])


class Boom:
    """Unpickling this would record that code ran."""

    ran = False

    def __reduce__(self):
        return (setattr, (Boom, "ran", True))


@pytest.mark.parametrize("payload", [Boom(), {"v": 1, "kind": "heartbeat"}, [1, 2, 3]])
def test_pickle_payloads_are_never_unpickled(payload):
    pickled = pickle.dumps(payload)
    assert pickle.loads(pickle.dumps(0)) == 0  # the module works; we just never call it on input
    for frames in ([pickled], [VALID_FRAMES[1][0], pickled], [pickled, pickled]):
        only_protocol_errors(frames)
    header = msgpack.unpackb(VALID_FRAMES[4][0], raw=False)
    header["args"] = {"obj": pickled}
    decode([msgpack.packb(header, use_bin_type=True)])  # bytes stay bytes
    assert Boom.ran is False


def test_caps_are_checked_before_unpacking():
    with pytest.raises(ProtocolError, match="^frames: "):
        decode([b"x"] * 2000)
    with pytest.raises(ProtocolError, match="^header: .*bytes"):
        decode([b"\x80" * (2 << 20)])
    with pytest.raises(ProtocolError, match="^header: nested"):
        decode([b"\x81\xa1a" + b"\x91" * 100 + b"\xc0"])
    with pytest.raises(ProtocolError, match="^frames: "):
        decode("not a list")


def test_errors_name_the_field():
    header = msgpack.unpackb(VALID_FRAMES[3][0], raw=False)
    header["pid"] = "123"
    with pytest.raises(ProtocolError, match="^pid: must be an integer"):
        decode([msgpack.packb(header, use_bin_type=True)])
    del header["pid"]
    with pytest.raises(ProtocolError, match="^pid: required field is missing"):
        decode([msgpack.packb(header, use_bin_type=True)])
    header = msgpack.unpackb(VALID_FRAMES[0][0], raw=False)
    header["kind"] = "weight_blob"
    with pytest.raises(ProtocolError):
        decode([msgpack.packb(header, use_bin_type=True), *VALID_FRAMES[0][1:]])
