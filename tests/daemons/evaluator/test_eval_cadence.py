"""The evaluator's cadence: rounds no closer than eval.interval_s, and within its share of the machine's CPU."""

from __future__ import annotations

import pytest

from tandem.daemons.evaluator.cadence import Cadence, machine_cores


def test_a_round_is_followed_by_a_pause_that_keeps_the_evaluator_within_its_share():
    cadence = Cadence(interval_s=0.5, max_cpu_share=0.1, cores=2, started=100.0, cpu_now=10.0)
    # a 2 s round that used 1 s of CPU; 0.2 cores allowed: the cycle must last 5 s
    next_at = cadence.next_round_at(100.0, 102.0, 1.0)
    assert next_at == pytest.approx(105.0) and cadence.wait_s == pytest.approx(3.0)
    counters = cadence.counters(next_at, 11.0)
    assert counters["eval_cpu_cores"] == pytest.approx(0.2) and counters["eval_cores_allowed"] == pytest.approx(0.2)
    assert counters["eval_round_s"] == pytest.approx(2.0) and counters["eval_wait_s"] == pytest.approx(3.0)


def test_interval_applies_when_the_share_is_more_than_the_evaluator_can_use():
    cadence = Cadence(interval_s=30.0, max_cpu_share=0.5, cores=16, started=0.0, cpu_now=0.0)  # 8 cores allowed
    assert cadence.next_round_at(0.0, 4.0, 4.0) == pytest.approx(30.0)
    assert cadence.next_round_at(30.0, 70.0, 40.0) == pytest.approx(70.0)  # a round longer than the interval
    assert cadence.wait_s == 0.0


def test_machine_cores_counts_what_this_process_may_use():
    assert machine_cores() >= 1
