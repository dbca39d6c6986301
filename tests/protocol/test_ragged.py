"""Entity keys on the wire (PROTOCOL.md 2.1.7): padded in memory, only the rows present on the wire."""

from __future__ import annotations

import dataclasses

import msgpack
import numpy as np
import pytest

from tandem.protocol import TransitionBatch, framing
from tandem.protocol.ragged import RAGGED, RaggedError
from tandem.protocol.transitions import wire_message
from tests.protocol.samples import batch_of

STEPS, ENVS, BOUND, FEATURES = 3, 2, 5, 4


def entity_batch(counts: np.ndarray, seed: int = 0, truncated_at: tuple[int, int] | None = (1, 0)) -> TransitionBatch:
    """An unroll whose observations hold `counts` [T+1, K] units of FEATURES features (padded to BOUND, zeros past
    each count) and a global vector; truncated at `truncated_at` (its final observation holds 2 units)."""
    rng = np.random.default_rng(seed)
    units = rng.standard_normal((STEPS + 1, ENVS, BOUND, FEATURES)).astype(np.float32)
    units[np.arange(BOUND) >= counts[..., None]] = 0.0
    obs = {"unit": units, "count:unit": counts.astype(np.int32), "global": rng.random((STEPS + 1, ENVS, 2), np.float32)}
    truncated = np.zeros((STEPS, ENVS), bool)
    if truncated_at is not None:
        truncated[truncated_at] = True
    final_units = np.zeros((int(truncated.sum()), BOUND, FEATURES), np.float32)
    final_units[:, :2] = 7.0
    final = {
        "unit": final_units,
        "count:unit": np.full(int(truncated.sum()), 2, np.int32),
        "global": np.ones((int(truncated.sum()), 2), np.float32),
    }
    actions = np.zeros((STEPS, ENVS, BOUND), np.int64)
    rewards = np.ones((STEPS, ENVS), np.float32)
    return batch_of(obs, actions, rewards, np.zeros((STEPS, ENVS), bool), truncated, final, env_steps=STEPS * ENVS)


def frames_with(batch: TransitionBatch, **changes) -> list[bytes]:
    """The batch's frames with header fields or arrays changed as a faulty sender would: `name=array` replaces the
    array called name (dots as in the wire, `__` for `.`), `ragged=value` the header field."""
    fields, arrays = wire_message(batch)
    for name, value in changes.items():
        if name == RAGGED:
            fields[RAGGED] = value
            continue
        wire_name = name.replace("__", ".").replace("count_", "count:")
        arrays = [(n, value if n == wire_name else a) for n, a in arrays]
    return [bytes(f) for f in framing.encode(TransitionBatch.KIND, fields, arrays)]


def header_of(frames: list[bytes]) -> dict:
    return msgpack.unpackb(frames[0])


def assert_same(a, b) -> None:
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
        assert a[key].dtype == b[key].dtype


@pytest.mark.parametrize(
    "counts",
    [
        np.array([[0, 5], [2, 0], [5, 5], [1, 3]]),  # none at all, and steps at the bound
        np.zeros((STEPS + 1, ENVS), int),  # no entity anywhere: the key carries no row
        np.full((STEPS + 1, ENVS), BOUND),  # every step at the bound
    ],
)
def test_a_ragged_batch_round_trips_bit_exactly(counts):
    batch = entity_batch(counts)
    frames = [bytes(f) for f in batch.to_frames()]
    assert header_of(frames)[RAGGED] == {"unit": BOUND}
    back = TransitionBatch.from_frames(frames)
    assert_same(batch.obs, back.obs)
    assert_same(batch.final_obs, back.final_obs)
    np.testing.assert_array_equal(back.actions, batch.actions)


def test_the_wire_carries_only_the_entities_present():
    """Bytes grow with the entities of the batch, by exactly their features' bytes."""
    sizes = {}
    for n in (0, 1, 3, 5):
        frames = entity_batch(np.full((STEPS + 1, ENVS), n), truncated_at=None).to_frames()
        sizes[n] = sum(len(memoryview(f)) for f in frames)
    row = FEATURES * 4  # float32 features of one entity
    for n in (1, 3, 5):
        assert sizes[n] - sizes[0] == n * (STEPS + 1) * ENVS * row, sizes


def test_a_plain_dict_batch_carries_no_ragged_field():
    batch = entity_batch(np.ones((STEPS + 1, ENVS), int))
    plain = dataclasses.replace(
        batch,
        obs={k: v for k, v in batch.obs.items() if k == "global"},
        final_obs={k: v for k, v in batch.final_obs.items() if k == "global"},
    )
    assert RAGGED not in header_of([bytes(f) for f in plain.to_frames()])


MALFORMED = {
    # counts that do not add up to the rows sent
    "rows_short": (dict(obs__unit=np.zeros((3, FEATURES), np.float32)), "obs.unit"),
    # a count over the bound the header gives
    "over_bound": (dict(ragged={"unit": 1}), "obs.count:unit"),
    # counts of another dtype
    "count_dtype": (dict(obs__count_unit=np.ones((STEPS + 1, ENVS), np.int64)), "obs.count:unit"),
    # a negative count
    "negative": (dict(obs__count_unit=np.full((STEPS + 1, ENVS), -1, np.int32)), "obs.count:unit"),
    # NaN among the features
    "nan": (dict(obs__unit=np.full((2 * (STEPS + 1) * ENVS, FEATURES), np.nan, np.float32)), "obs.unit"),
    # the header names a key obs does not have, or one without counts
    "unknown_key": (dict(ragged={"enemy": BOUND}), RAGGED),
    "no_counts": (dict(ragged={"global": BOUND}), RAGGED),
    "bad_bound": (dict(ragged={"unit": 0}), RAGGED),
    "not_a_map": (dict(ragged=["unit"]), RAGGED),
    # a bound and a row width whose padding would take more memory than a receiver gives one key
    "huge_padding": (
        dict(
            ragged={"unit": 4096},
            obs__count_unit=np.zeros((STEPS + 1, ENVS), np.int32),
            obs__unit=np.zeros((0, 100_000), np.float32),
        ),
        RAGGED,
    ),
    # a count key is never ragged itself (its padding would multiply again)
    "count_ragged": (dict(ragged={"unit": BOUND, "count:unit": BOUND}), RAGGED),
    # the final observations' rows do not add up either
    "final_rows": (dict(final_obs__unit=np.zeros((5, FEATURES), np.float32)), "final_obs.unit"),
}


@pytest.mark.parametrize("form", sorted(MALFORMED))
def test_every_malformed_ragged_form_is_refused_by_name(form):
    changes, field = MALFORMED[form]
    frames = frames_with(entity_batch(np.full((STEPS + 1, ENVS), 2)), **changes)
    with pytest.raises(RaggedError) as caught:
        TransitionBatch.from_frames(frames)
    assert caught.value.field == field, caught.value
    assert caught.value.reason == "entities"


def test_a_ragged_field_on_a_batch_of_one_array_is_refused():
    batch = entity_batch(np.ones((STEPS + 1, ENVS), int))
    plain = dataclasses.replace(batch, obs=batch.obs["global"], final_obs=batch.final_obs["global"])
    fields, arrays = wire_message(plain)
    fields[RAGGED] = {"unit": BOUND}
    with pytest.raises(RaggedError, match="names keys of obs.KEY arrays"):
        TransitionBatch.from_frames([bytes(f) for f in framing.encode(TransitionBatch.KIND, fields, arrays)])


def test_counts_sent_whole_are_checked_too():
    """An entity key sent padded (no `ragged` field) still has its counts checked: the policy cuts by them."""
    from tandem.protocol.transitions import wire_arrays

    batch = entity_batch(np.full((STEPS + 1, ENVS), 2))
    for counts, words in (
        (np.full((STEPS + 1, ENVS), BOUND + 1, np.int32), "counts must be in"),
        (np.full((STEPS + 1, ENVS), 2, np.int64), "must be int32"),
    ):
        bad = dataclasses.replace(batch, obs={**batch.obs, "count:unit": counts})
        fields = {name: getattr(bad, name) for name in ("policy_id", "actor_id", "incarnation", "seq", "policy_version",
                                                          "env_steps")}  # fmt: skip
        frames = [bytes(f) for f in framing.encode(TransitionBatch.KIND, fields, wire_arrays(bad, {}))]
        with pytest.raises(RaggedError, match=words) as caught:
            TransitionBatch.from_frames(frames)
        assert caught.value.field == "obs.count:unit"
