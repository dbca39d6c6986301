"""`tandem status` reads a learner's time shares from its heartbeat's counters, and nothing before its first window."""

from __future__ import annotations

from tandem.daemons.supervisor.status import time_split


def test_the_time_shares_are_read_from_the_learners_counters():
    counters = {"train_time_wait": 0.25, "train_time_compute": 0.5, "train_loss": 1.5, "time_other": 0.9}
    assert time_split(counters) == {"wait": 0.25, "compute": 0.5}
    assert time_split({"train_loss": 1.5}) is None
