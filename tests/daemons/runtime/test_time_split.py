"""Where a loop's time goes: each part's share of a window, the rest counted as other."""

from __future__ import annotations

import pytest

from tandem.daemons.runtime.time_split import TimeSplit


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_part_is_its_share_of_the_window_and_the_rest_is_other():
    clock = Clock()
    split = TimeSplit(clock)
    assert split.shares == {}
    with split.timing("prepare"):
        clock.now += 1.0
    with split.timing("compute"):
        clock.now += 2.5
    clock.now += 0.5  # the loop's chores: counted in no part
    shares = split.close_window()
    assert shares == pytest.approx(
        {"time_wait": 0.0, "time_prepare": 0.25, "time_compute": 0.625, "time_publish": 0.0, "time_other": 0.125}
    )
    with split.timing("wait"):
        clock.now += 2.0
    assert split.close_window()["time_wait"] == 1.0  # a new window: what came before is not in it
    assert split.close_window() == split.shares  # an empty window keeps the last shares


def test_a_part_that_raises_is_still_counted():
    clock = Clock()
    split = TimeSplit(clock)
    with pytest.raises(RuntimeError), split.timing("publish"):
        clock.now += 1.0
        raise RuntimeError("send failed")
    clock.now += 1.0
    assert split.close_window()["time_publish"] == 0.5
