"""`tandem status` reads a learner's time shares from its heartbeat's counters, and nothing before its first window;
and a replica's group (generation, members, re-formings, updates lost), and nothing for a lone learner."""

from __future__ import annotations

from tandem.daemons.supervisor.status import replica_group, time_split


def test_the_time_shares_are_read_from_the_learners_counters():
    counters = {"train_time_wait": 0.25, "train_time_compute": 0.5, "train_loss": 1.5, "time_other": 0.9}
    assert time_split(counters) == {"wait": 0.25, "compute": 0.5}
    assert time_split({"train_loss": 1.5}) is None


def test_a_replicas_group_is_read_from_its_counters_and_a_lone_learner_has_none():
    counters = {"replica_generation": 3.0, "replicas": 2.0, "replica_reforms": 2.0, "replica_updates_lost": 1.0}
    assert replica_group(counters) == {"generation": 3, "members": 2, "reforms": 2, "updates_lost": 1}
    assert replica_group({"updates": 5.0}) is None
