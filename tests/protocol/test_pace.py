"""The weight blob's optional fields (the budget `pace_per_s`, `pace_streams`, `pace_credit`, and `env_steps`):
round trip, absence, bad values."""

from __future__ import annotations

import math

import msgpack
import pytest

from tandem.protocol import ProtocolError, WeightBlob, decode
from tests.protocol import samples


def with_header(blob: WeightBlob, **changes) -> list[bytes]:
    """The blob's frames with header keys replaced (None removes a key), as a peer could send them."""
    frames = [bytes(f) for f in blob.to_frames()]
    header = msgpack.unpackb(frames[0], raw=False)
    for key, value in changes.items():
        if value is None:
            header.pop(key, None)
        else:
            header[key] = value
    return [msgpack.packb(header, use_bin_type=True), *frames[1:]]


def test_budget_round_trips():
    blob = samples.blob()
    paced = WeightBlob.build("default", 3, 30, blob.tensors, pace_per_s=1234.5, pace_streams=4)
    back = decode([bytes(f) for f in paced.to_frames()])
    assert (back.pace_per_s, back.pace_streams, back.pace_credit) == (1234.5, 4, 0)
    back.verify_checksum()


def test_a_credit_travels_without_a_rate():
    """An on-policy learner grants a credit per version before it has measured any rate."""
    credited = WeightBlob.build("default", 0, 0, samples.blob().tensors, pace_streams=2, pace_credit=1024)
    back = decode([bytes(f) for f in credited.to_frames()])
    assert (back.pace_per_s, back.pace_streams, back.pace_credit) == (0.0, 2, 1024)


def test_a_blob_without_the_fields_means_no_limit():
    frames = with_header(samples.blob(), pace_per_s=None, pace_streams=None)
    back = WeightBlob.from_frames(frames)
    assert (back.pace_per_s, back.pace_streams, back.pace_credit) == (0.0, 0, 0)
    header = msgpack.unpackb(bytes(samples.blob().to_frames()[0]), raw=False)
    assert "pace_per_s" not in header  # no limit is sent as no field, as an older learner sends it


def test_an_integer_rate_is_a_number():
    back = WeightBlob.from_frames(with_header(samples.blob(), pace_per_s=500, pace_streams=2))
    assert back.pace_per_s == 500.0 and isinstance(back.pace_per_s, float)


@pytest.mark.parametrize(
    "key,value",
    [
        ("pace_per_s", -1.0),
        ("pace_per_s", math.nan),
        ("pace_per_s", math.inf),
        ("pace_per_s", 1e13),
        ("pace_per_s", "fast"),
        ("pace_per_s", True),
        ("pace_per_s", [1.0]),
        ("pace_streams", -1),
        ("pace_streams", 1.5),
        ("pace_streams", True),
        ("pace_streams", 1 << 21),
        ("pace_streams", "2"),
        ("pace_credit", -1),
        ("pace_credit", 2.0),
        ("pace_credit", True),
        ("pace_credit", (1 << 40) + 1),
        ("pace_credit", "8"),
        ("env_steps", -1),
        ("env_steps", 1.0),
        ("env_steps", False),
        ("env_steps", (1 << 62) + 1),
        ("env_steps", "100"),
    ],
)
def test_bad_values_are_protocol_errors_naming_the_field(key, value):
    frames = with_header(samples.blob(), **{"pace_per_s": 100.0, "pace_streams": 1, key: value})
    with pytest.raises(ProtocolError) as caught:
        decode(frames)
    assert caught.value.field == key


def test_a_sender_cannot_encode_a_bad_budget():
    bad = WeightBlob.build("default", 1, 1, samples.blob().tensors, pace_per_s=math.inf, pace_streams=1)
    with pytest.raises(ProtocolError):
        bad.to_frames()


def test_env_steps_travel_and_are_absent_when_unknown():
    counted = WeightBlob.build("default", 7, 7, samples.blob().tensors, env_steps=123_456)
    back = decode([bytes(f) for f in counted.to_frames()])
    assert back.env_steps == 123_456
    back.verify_checksum()
    header = msgpack.unpackb(bytes(samples.blob().to_frames()[0]), raw=False)
    assert "env_steps" not in header  # unknown is sent as no field, as an older learner sends it
    assert WeightBlob.from_frames(with_header(samples.blob(), env_steps=None)).env_steps == 0
