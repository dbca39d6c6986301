"""A learner facing a full disk or odd snapshot requests: counted, answered, and never the end of training."""

from __future__ import annotations

import msgpack
import pytest

from tandem.daemons.config import load_config
from tandem.daemons.learner.snapshots import serve_snapshots
from tandem.protocol import ControlRequest, WeightBlob, WeightRequest, decode, sockets
from tandem.protocol.limits import PROTOCOL_VERSION
from tests.system.harness import ROOT

WAIT_MS = 3000


@pytest.fixture
def learner(tmp_path, built_learner):
    learner = built_learner(load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'"]))
    learner.publish()
    return learner


def test_a_disk_that_refuses_writes_is_counted_and_training_goes_on(learner, tmp_path):
    assert learner.checkpointer.save()
    good = sorted(learner.disk.dir.glob("ckpt-*.pt"))
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    learner.disk.dir = blocker / "learner-default"  # every write under it fails, as on a full or broken disk
    assert learner.checkpointer.save() is False
    learner.progress.version += 1
    learner.publish()  # the version floor cannot be written either: still publishes
    assert learner.progress.counts["disk_write_failures"] == 2 and learner.progress.counts["checkpoints"] == 1
    assert sorted((tmp_path / "learner-default").glob("ckpt-*.pt")) == good  # the last good one is kept
    assert not list((tmp_path / "learner-default").glob(".ckpt-*"))  # and no stray temp file


def ask(learner, frames) -> object:
    """Send frames to the learner's snapshot socket, let it serve, and decode its answer."""
    ctx = sockets.new_context()
    dealer = sockets.control_dealer(ctx, learner.binding.endpoints["snapshot"])
    try:
        assert sockets.send_frames(dealer, frames, timeout_ms=WAIT_MS)
        assert sockets.poll([learner.binding.snapshot_router], WAIT_MS)
        # answered on this thread: the snapshot thread starts with the loop
        serve_snapshots(
            learner.binding.snapshot_router,
            learner.policy_id,
            learner.progress.version,
            learner.publisher.latest_frames,
            learner.progress.counts,
        )
        reply = sockets.recv_frames(dealer, WAIT_MS)
        assert reply is not None, "no answer"
        return decode(reply)
    finally:
        sockets.close_context(ctx, 0)


def test_snapshot_requests_for_another_policy_or_of_another_kind_are_refused_and_counted(learner):
    served = ask(learner, WeightRequest("default", -1, "actor-0").to_frames())
    assert isinstance(served, WeightBlob) and served.policy_id == "default"
    other = ask(learner, WeightRequest("speaker", -1, "actor-0").to_frames())
    assert (other.ok, other.code) == (False, "wrong_policy")
    kind = ask(learner, ControlRequest(3, "status", {}).to_frames())
    assert (kind.ok, kind.code) == (False, "bad_kind")
    bad = ask(
        learner, [msgpack.packb({"v": PROTOCOL_VERSION, "kind": "weight_request", "request_id": 12, "policy_id": 5})]
    )
    assert (bad.ok, bad.code, bad.request_id) == (False, "bad_message", 12)
    assert (
        learner.progress.counts["snapshot_requests_refused"] == 3 and learner.progress.counts["snapshots_served"] == 1
    )


def test_a_refused_write_is_a_fault_until_one_of_its_kind_succeeds(learner, tmp_path):
    """The heartbeat carries the errno of the newest write still failing (the supervisor shows it), and the
    version floor's temp file does not stay behind."""
    assert learner.metrics.counters()["disk_write_errno"] == 0
    good_dir = learner.disk.dir
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    learner.disk.dir = blocker / "learner-default"
    learner.progress.version += 1
    learner.publish()
    assert learner.metrics.counters()["disk_write_errno"] == 20  # ENOTDIR
    assert not list(tmp_path.rglob("version.tmp"))
    learner.disk.dir = good_dir
    learner.progress.version += 1
    learner.publish()
    assert learner.metrics.counters()["disk_write_errno"] == 0
    assert learner.metrics.counters()["checkpoint_write_s"] >= 0.0


def test_the_version_floor_leaves_no_temp_file_when_its_write_fails(tmp_path, monkeypatch):
    import os

    from tandem.daemons.learner.version_floor import read_floor, write_floor

    path = tmp_path / "version"
    write_floor(path, 7)

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        write_floor(path, 8)
    assert read_floor(path) == 7 and not (tmp_path / "version.tmp").exists()


class BrokenEvents:
    """A TensorBoard writer whose writer thread met a full disk: it raises that on every call."""

    def add_scalar(self, *args):
        raise OSError(28, "No space left on device")

    def close(self):
        raise OSError(28, "No space left on device")


def test_a_tensorboard_writer_that_met_a_full_disk_is_started_again_once_there_is_room(tmp_path):
    pytest.importorskip("tensorboard")
    from tandem.daemons.learner.metrics_log import MetricsLog

    metrics = MetricsLog(tmp_path / "metrics.jsonl", tmp_path / "tensorboard")
    metrics.writer = BrokenEvents()
    with pytest.raises(OSError):
        metrics.write(1, {"loss": 1.0})  # counted by the caller as a refused write of the metrics
    metrics.write(2, {"loss": 0.5})  # a new event file: the failure is over
    assert metrics.writer is not None and not isinstance(metrics.writer, BrokenEvents)
    metrics.close()
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2
