"""When a learner checkpoints: by time, by updates, and never so often that writing eats its training."""

from __future__ import annotations

from tandem.daemons.learner.cadence import FIRST_CHECKPOINT_S, MAX_WRITE_SHARE, CheckpointCadence


def test_by_time_the_first_comes_soon_then_every_interval():
    cadence = CheckpointCadence(interval_s=60.0, every_updates=0)
    cadence.start(100.0, updates=0)
    assert not cadence.due(100.0 + FIRST_CHECKPOINT_S - 0.1, updates=10**6)  # 0: updates never make one due
    assert cadence.due(100.0 + FIRST_CHECKPOINT_S, updates=0)
    cadence.written(110.0, 5, 0.01)
    assert not cadence.due(169.9, updates=5) and cadence.due(170.0, updates=5)


def test_by_updates_a_kill_loses_at_most_every_updates():
    """A DQN learner at 150 updates/s with a 60 s interval lost up to 9,000 updates to a kill; 500 bound it."""
    cadence = CheckpointCadence(interval_s=60.0, every_updates=500)
    cadence.start(0.0, updates=1200)  # resumed from a checkpoint with 1200 updates: counted from there
    assert not cadence.due(3.0, updates=1699)
    assert cadence.due(3.3, updates=1700)
    cadence.written(3.31, 1700, 0.01)
    assert not cadence.due(5.0, updates=2199) and cadence.due(6.7, updates=2200)


def test_a_costly_checkpoint_is_written_no_more_than_its_share_of_the_time():
    """A 2 s write (a big replay saved too) is not repeated for 2 / MAX_WRITE_SHARE s, however fast updates come."""
    cadence = CheckpointCadence(interval_s=600.0, every_updates=100)
    cadence.start(0.0, updates=0)
    cadence.written(10.0, 0, 2.0)
    gap_s = 2.0 / MAX_WRITE_SHARE
    assert not cadence.due(10.0 + gap_s - 0.1, updates=5_000)
    assert cadence.due(10.0 + gap_s, updates=5_000)


def test_a_failed_write_waits_for_the_cadence_like_a_good_one():
    """A full disk is tried again after the next updates or interval, not on every pass of the loop."""
    cadence = CheckpointCadence(interval_s=5.0, every_updates=500)
    cadence.start(0.0, updates=0)
    assert cadence.due(2.0, updates=500)
    cadence.written(2.0, 500, 0.001)  # refused at once
    assert not cadence.due(2.01, updates=501)
