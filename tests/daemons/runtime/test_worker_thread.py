"""A daemon's helper thread: what it raises is kept and reported by check(), and stop() is bounded."""

from __future__ import annotations

import threading

import pytest

from tandem.daemons.runtime.worker_thread import WorkerThread


class Died(Exception):
    pass


def test_what_the_thread_raises_is_raised_by_check_and_counted():
    errors = []
    worker = WorkerThread("demo", Died, on_error=errors.append)
    worker.check()  # not started: nothing to report
    worker.start(lambda: (_ for _ in ()).throw(ValueError("broken")))
    worker.thread.join(5)
    with pytest.raises(Died, match="the demo thread died: ValueError") as raised:
        worker.check()
    assert isinstance(raised.value.__cause__, ValueError) and [type(e) for e in errors] == [ValueError]


def test_a_thread_that_ends_on_its_own_is_reported_and_a_stopped_one_is_not():
    quiet = WorkerThread("quiet", Died)
    quiet.start(lambda: None)
    quiet.thread.join(5)
    with pytest.raises(Died, match="the quiet thread died: None"):
        quiet.check()
    looping = WorkerThread("looping", Died)
    looping.start(lambda: looping.stop_event.wait(30))
    assert looping.stop(timeout_s=5) and not looping.thread.is_alive()
    looping.check()  # asked to stop: not a death


def test_stop_waits_at_most_its_timeout():
    release = threading.Event()
    stuck = WorkerThread("stuck", Died)
    stuck.start(release.wait, 30)  # ignores the stop flag
    try:
        assert stuck.stop(timeout_s=0.1) is False
    finally:
        release.set()
        stuck.thread.join(5)
