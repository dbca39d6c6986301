"""Checkpoints round-trip an algorithm exactly, survive torn and corrupt files, prune, and never run code."""

from __future__ import annotations

import logging
import os
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

from tandem.daemons.algorithms.dqn.learner import DoubleDQN
from tandem.daemons.algorithms.dqn.spec import DQNSection
from tandem.daemons.checkpoints.files import checkpoint_path, load_latest_checkpoint, save_checkpoint
from tandem.daemons.replay import SampledBatch
from tandem.daemons.settings.schema import ModelSection
from tests.daemons.configs import run_config

VECTOR = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)


def algorithm(seed: int = 0) -> DoubleDQN:
    config = run_config(
        seed, model=ModelSection(hidden_sizes=[16]), algorithm=DQNSection(learning_rate=1e-2, target_update_interval=2)
    )
    return DoubleDQN(config, VECTOR, gym.spaces.Discrete(4))


def sample(rng: np.random.Generator, size: int = 16) -> SampledBatch:
    return SampledBatch(
        obs=rng.normal(size=(size, 3)).astype(np.float32),
        actions=rng.integers(4, size=size),
        returns=rng.normal(size=size).astype(np.float32),
        next_obs=rng.normal(size=(size, 3)).astype(np.float32),
        discounts=np.full(size, 0.9, np.float32),
        versions=np.zeros(size, np.int64),
        indices=np.arange(size, dtype=np.int64),
        weights=np.ones(size, np.float32),
    )


def state(version: int, **extra) -> dict:
    return {"version": version, "tensor": torch.full((2,), float(version)), **extra}


def names(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_algorithm_round_trip_gives_identical_outputs_and_optimizer_state(tmp_path):
    rng = np.random.default_rng(0)
    algo = algorithm(seed=0)
    for _ in range(5):
        algo.update(sample(rng))
    path = save_checkpoint(tmp_path, {"version": 5, "algorithm": algo.state_dict()})
    assert path == checkpoint_path(tmp_path, 5) and path.name == "ckpt-000000000005.pt"

    loaded = load_latest_checkpoint(tmp_path)
    restored = algorithm(seed=1)  # different initial weights: everything must come from the checkpoint
    restored.load_state_dict(loaded["algorithm"])
    assert restored.updates == 5
    opt_a, opt_b = algo.optimizer.state_dict(), restored.optimizer.state_dict()
    for key, slot in opt_a["state"].items():
        for name, value in slot.items():
            assert torch.equal(value, opt_b["state"][key][name]), (key, name)

    probe = sample(rng)  # the next update (Adam moments, target sync at update 6) must match exactly
    first, second = algo.update(probe), restored.update(probe)
    assert first.metrics == second.metrics
    np.testing.assert_array_equal(first.priorities, second.priorities)
    for name, value in algo.weights().items():
        np.testing.assert_array_equal(value, restored.weights()[name])
    for name, value in algo.target.state_dict().items():
        assert torch.equal(value, restored.target.state_dict()[name])


def test_no_checkpoint_gives_none(tmp_path):
    assert load_latest_checkpoint(tmp_path) is None
    assert load_latest_checkpoint(tmp_path / "missing") is None


def test_keep_prunes_to_the_newest(tmp_path):
    for version in (1, 2, 3, 10, 11):
        save_checkpoint(tmp_path, state(version), keep=3)
    assert names(tmp_path) == ["ckpt-000000000003.pt", "ckpt-000000000010.pt", "ckpt-000000000011.pt"]
    assert load_latest_checkpoint(tmp_path)["version"] == 11
    save_checkpoint(tmp_path, state(12), keep=1)
    assert names(tmp_path) == ["ckpt-000000000012.pt"]


def test_leftover_temp_file_is_never_loaded_and_is_cleaned_up(tmp_path):
    save_checkpoint(tmp_path, state(1))
    torn = tmp_path / ".ckpt-crashed.tmp"
    torn.write_bytes(b"PK\x03\x04 half of a zip")  # a writer died before its rename
    assert load_latest_checkpoint(tmp_path)["version"] == 1
    save_checkpoint(tmp_path, state(2))
    assert names(tmp_path) == ["ckpt-000000000001.pt", "ckpt-000000000002.pt"]


def test_corrupt_newest_falls_back_to_the_previous_one(tmp_path, caplog):
    save_checkpoint(tmp_path, state(1))
    good = save_checkpoint(tmp_path, state(2))
    checkpoint_path(tmp_path, 3).write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # truncated
    checkpoint_path(tmp_path, 4).write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="tandem.daemons.checkpoints.files"):
        loaded = load_latest_checkpoint(tmp_path)
    assert loaded["version"] == 2
    torch.testing.assert_close(loaded["tensor"], torch.full((2,), 2.0))
    assert "ckpt-000000000004.pt" in caplog.text and "ckpt-000000000003.pt" in caplog.text


def test_save_after_a_corrupt_newer_file_keeps_the_new_one(tmp_path):
    checkpoint_path(tmp_path, 9).write_bytes(b"garbage")  # newer than anything we will write
    path = save_checkpoint(tmp_path, state(3), keep=1)
    assert path.exists()
    assert load_latest_checkpoint(tmp_path)["version"] == 3


def _write_marker(path: str) -> None:
    with open(path, "w") as f:
        f.write("code ran")


class Payload:
    """Unpickling this calls _write_marker: what a hostile checkpoint would do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (_write_marker, (self.marker,))


def test_pickled_objects_are_refused_and_no_code_runs(tmp_path, caplog):
    marker = tmp_path / "marker"
    save_checkpoint(tmp_path, state(1))
    torch.save({"version": 2, "payload": Payload(str(marker))}, checkpoint_path(tmp_path, 2))
    with caplog.at_level(logging.WARNING, logger="tandem.daemons.checkpoints.files"):
        loaded = load_latest_checkpoint(tmp_path)
    assert loaded["version"] == 1
    assert not marker.exists()
    assert "ckpt-000000000002.pt" in caplog.text
    # The same file loaded without weights_only would have run the payload: the test above is meaningful.
    torch.load(checkpoint_path(tmp_path, 2), weights_only=False)
    assert marker.read_text() == "code ran"


def test_plain_pickle_file_is_refused(tmp_path):
    marker = tmp_path / "marker"
    checkpoint_path(tmp_path, 1).write_bytes(pickle.dumps({"version": 1, "payload": Payload(str(marker))}, protocol=2))
    assert load_latest_checkpoint(tmp_path) is None
    assert not marker.exists()


def test_numpy_arrays_must_be_converted_by_the_caller(tmp_path):
    with pytest.raises(TypeError, match=r"state\['replay'\]\['obs'\] is a numpy.ndarray.*torch.from_numpy"):
        save_checkpoint(tmp_path, {"version": 1, "replay": {"obs": np.zeros(3)}})
    assert names(tmp_path) == []  # nothing written, not even a temp file
    save_checkpoint(tmp_path, {"version": 1, "replay": {"obs": torch.from_numpy(np.zeros(3))}})


def test_version_is_required(tmp_path):
    with pytest.raises(ValueError, match="version"):
        save_checkpoint(tmp_path, {"tensor": torch.zeros(1)})
    with pytest.raises(ValueError, match="keep"):
        save_checkpoint(tmp_path, state(1), keep=0)


def test_checkpoint_files_are_private(tmp_path):
    path = save_checkpoint(tmp_path, state(1))
    assert os.stat(path).st_mode & 0o077 == 0
