"""A Dict observation's stacked key sent as its frames (PROTOCOL.md 2.1.5): cut and rebuilt exactly, refused when
malformed, and the other keys untouched."""

from __future__ import annotations

import dataclasses

import msgpack
import numpy as np
import pytest

from tandem.protocol import ProtocolError, TransitionBatch, stacks
from tests.frame_envs import STACK, Actor, stacked_screen
from tests.protocol.test_stacks import tamper, wire


def keyed_actor(seed: int, end_prob: float = 0.3) -> Actor:
    return Actor(3, seed=seed, end_prob=end_prob, make=stacked_screen)


@pytest.mark.parametrize("end_prob", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("steps", [0, 1, 3, 7])
def test_a_stacked_key_rebuilds_exactly_and_the_others_travel_whole(steps, end_prob):
    actor = keyed_actor(steps, end_prob)
    for _ in range(10):
        batch = actor.unroll(steps)
        packed, whole = stacks.pack_keys(batch, {"screen": STACK})
        assert whole == [] and packed.obs_stacks == {"screen": STACK}
        assert packed.obs["screen"].shape == (steps + 1, 3, 2, 3)  # the newest screen of each observation
        assert packed.obs_history["screen"].shape == (3, STACK - 1, 2, 3)
        assert packed.obs["state"] is batch.obs["state"]
        back = stacks.unpack(TransitionBatch.from_frames(wire(packed)))
        assert list(back.obs) == ["screen", "state"] and not back.obs_stacks and back.obs_history is None
        for key in ("screen", "state"):
            np.testing.assert_array_equal(back.obs[key], batch.obs[key])
            np.testing.assert_array_equal(back.final_obs[key], batch.final_obs[key])
            assert back.obs[key].dtype == batch.obs[key].dtype


def test_the_wire_names_the_stacked_key_and_carries_its_history():
    packed, _ = stacks.pack_keys(keyed_actor(1).unroll(5), {"screen": STACK})
    header = msgpack.unpackb(wire(packed)[0])
    assert header["obs_stacks"] == {"screen": STACK} and "obs_stack" not in header
    names = [a["name"] for a in header["arrays"]]
    assert "obs_history.screen" in names and "obs_history" not in names and "obs_history.state" not in names
    # Bytes on the wire: each screen once, not STACK times (the float state is the same either way).
    whole_bytes = sum(len(f) for f in wire(keyed_actor(1).unroll(5)))
    assert sum(len(f) for f in wire(packed)) < whole_bytes


def test_a_key_that_is_not_stacked_by_the_rule_travels_whole():
    batch = keyed_actor(2).unroll(6)
    screens = batch.obs["screen"].copy()
    screens[2, 0, 0] += 1  # an older frame that is not the newest frame of the step before
    changed = dataclasses.replace(batch, obs={**batch.obs, "screen": screens})
    same, whole = stacks.pack_keys(changed, {"screen": STACK})
    assert same is changed and whole == ["screen"]
    # A candidate whose depth is not the key's, or a key the batch lacks, is refused the same way.
    assert stacks.pack_keys(batch, {"screen": STACK + 1})[1] == ["screen"]
    assert stacks.pack_keys(batch, {"state": 2, "camera": 4})[1] == ["state", "camera"]
    # The plain path does not take a keyed batch.
    assert stacks.pack(batch, STACK) is None


def put_history(name: str, envs: int, older: int, frame: tuple[int, ...], dtype=np.uint8):
    """An edit that sends zeros [envs, older, *frame] of `dtype` as the array `name`."""
    array = np.zeros((envs, older, *frame), dtype)

    def edit(header, arrays) -> None:
        arrays[name] = ({"name": name, "dtype": array.dtype.str, "shape": list(array.shape)}, array.tobytes())

    return edit


SCREEN = (2, 3)
BAD = {  # what is wrong -> (the edit of the header and arrays, the field the error must name)
    "obs_stacks not a map": (lambda h, a: h.update(obs_stacks=4), "obs_stacks"),
    "obs_stacks a key of no obs": (lambda h, a: h.update(obs_stacks={"screen": STACK, "camera": 4}), "obs_stacks"),
    "S of 1": (lambda h, a: h.update(obs_stacks={"screen": 1}), "obs_stacks.screen"),
    "S a bool": (lambda h, a: h.update(obs_stacks={"screen": True}), "obs_stacks.screen"),
    "S too large": (lambda h, a: h.update(obs_stacks={"screen": 65}), "obs_stacks.screen"),
    "obs_stack with keys": (lambda h, a: h.update(obs_stack=STACK), "obs_stack"),
    "history missing": (lambda h, a: a.pop("obs_history.screen"), "obs_history.screen"),
    "history of an unstacked key": (
        put_history("obs_history.state", 3, STACK - 1, (2,), np.float32),
        "obs_history.state",
    ),
    "history without obs_stacks": (lambda h, a: h.pop("obs_stacks"), "obs_history"),
    "history too short": (put_history("obs_history.screen", 3, STACK - 2, SCREEN), "obs_history.screen"),
    "history of another dtype": (
        put_history("obs_history.screen", 3, STACK - 1, SCREEN, np.int16),
        "obs_history.screen",
    ),
    "history for other envs": (put_history("obs_history.screen", 2, STACK - 1, SCREEN), "obs_history.screen"),
    "a plain history beside a keyed one": (put_history("obs_history", 3, STACK - 1, SCREEN), "obs_history"),
}


@pytest.mark.parametrize("what", list(BAD))
def test_malformed_keyed_stacks_are_refused_naming_the_field(what):
    packed, _ = stacks.pack_keys(keyed_actor(3).unroll(4), {"screen": STACK})
    TransitionBatch.from_frames(tamper(packed, lambda h, a: None))  # untouched: fine
    edit, field = BAD[what]
    with pytest.raises(ProtocolError) as err:
        TransitionBatch.from_frames(tamper(packed, edit))
    assert err.value.field == field


def test_obs_stacks_on_a_single_array_batch_is_refused():
    batch = Actor(2, seed=4).unroll(3)
    with pytest.raises(ProtocolError) as err:
        TransitionBatch.from_frames(tamper(batch, lambda h, a: h.update(obs_stacks={"obs": 4})))
    assert err.value.field == "obs_stacks"
