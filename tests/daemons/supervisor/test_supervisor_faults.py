"""Faults status must show: a disk refusing writes (a learner's, the supervisor's own) and a planned restart's
reason as the last error."""

from __future__ import annotations

import errno
import logging

import pytest

from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.metrics_http import health
from tandem.daemons.supervisor.observer import Observer
from tandem.daemons.supervisor.run_metrics import RunMetricsLog
from tandem.daemons.supervisor.status import status_data
from tests.daemons.supervisor.builders import as_started, beat, supervisor

LEARNER = "learner-default"


def test_a_learner_whose_disk_refuses_writes_is_unhealthy_with_the_reason_as_its_last_error(tmp_path):
    sup = as_started(supervisor(tmp_path))
    sup.heartbeat(beat(LEARNER, disk_write_failures=3, disk_write_errno=errno.ENOSPC), now=1.0)
    data = status_data(sup, 1.0)
    row = next(r for r in data["processes"] if r["name"] == LEARNER)
    assert "No space left on device" in row["last_error"] and row["fault"] == row["last_error"]
    assert data["unhealthy"] == [LEARNER] and "No space left" in data["unhealthy_reasons"][LEARNER]
    code, body = health({"status": data, "figures": {}, "published": 1.0}, 1.0)
    assert code == 503 and "No space left on device" in body["reason"]
    sup.heartbeat(beat(LEARNER, disk_write_failures=9, disk_write_errno=0), now=2.0)  # room again
    data = status_data(sup, 2.0)
    row = next(r for r in data["processes"] if r["name"] == LEARNER)
    assert data["unhealthy"] == [] and row["fault"] == "" and "No space left" in row["last_error"]


def test_the_supervisor_that_cannot_append_its_metrics_says_so_in_status_and_logs_it_throttled(tmp_path, caplog):
    sup = as_started(supervisor(tmp_path))
    observer = Observer(sup.config, tmp_path)
    good = observer.curves.file
    observer.curves.file = open("/dev/full", "a")  # noqa: SIM115 - every flush fails with ENOSPC, as a full disk
    try:
        with caplog.at_level(logging.INFO, logger="tandem.daemons.supervisor.observer"):
            for second in range(10):
                observer.tick(sup, float(second))
        data = status_data(sup, 9.0)
        assert data["unhealthy"] == ["supervisor"]
        assert "No space left on device" in data["unhealthy_reasons"]["supervisor"]
        said = [r.getMessage() for r in caplog.records if "metrics.jsonl" in r.getMessage()]
        assert len(said) == 4, said  # failures 1, 2, 4 and 8 of 10
    finally:
        full, observer.curves.file = observer.curves.file, good
        try:
            full.close()
        except OSError:
            pass  # what it still buffers cannot go anywhere
    observer.tick(sup, 10.0)
    assert status_data(sup, 10.0)["unhealthy"] == []
    observer.close(sup, 10.5)


class BrokenEvents:
    """The run's TensorBoard writer after its thread met a full disk: whatever is called raises that."""

    def __getattr__(self, name: str):
        def full(*args):
            raise OSError(errno.ENOSPC, "No space left on device")

        return full


def test_the_runs_tensorboard_writer_is_started_again_once_there_is_room(tmp_path):
    pytest.importorskip("tensorboard")
    curves = RunMetricsLog(tmp_path)
    curves.tensorboard = BrokenEvents()
    with pytest.raises(OSError):
        curves.write({"env_steps": 1})
    curves.write({"env_steps": 2})
    assert curves.tensorboard is not None and not isinstance(curves.tensorboard, BrokenEvents)
    curves.close()


def test_a_restart_for_the_memory_limit_is_the_last_error_too():
    """PROTOCOL.md 2.4: the supervisor's reason is the last error; it was only in last_recycle."""
    rec = states.ProcessRecord("actor-0", "actor")
    states.started(rec, 100, 0.0)
    states.heartbeat(rec, "running", 0.0, 0.5)
    states.recycle(rec, "rss 300 MiB over its limit of 100 MiB", 1.0)
    assert rec.last_error == rec.last_recycle == "rss 300 MiB over its limit of 100 MiB"
