"""The actor's pacer (a token bucket at its share of the budget) and the learner's consumption, on explicit clocks."""

from __future__ import annotations

import pytest

from tandem.daemons.actor.pacer import MAX_SLICE_S, Pacer
from tandem.daemons.feeds.replay_feed import consumed_per_update
from tandem.daemons.learner.pace import FILL_TARGET, STARVED_SHARE_MAX, PaceMeter
from tandem.daemons.settings.schema import RunConfig

# ------------------------------------------------------------------ the actor's pacer


def drive(pacer: Pacer, start: float, seconds: float, batch: int, batch_s: float) -> tuple[int, float]:
    """An actor producing one `batch` every `batch_s` when not told to wait; (transitions sent, time waited)."""
    now, sent, waited = start, 0, 0.0
    while now < start + seconds:
        wait = pacer.wait_s(now)
        if wait > 0:
            assert wait <= MAX_SLICE_S
            now += wait
            waited += wait
            continue
        now += batch_s
        pacer.spend(now, batch)
        sent += batch
    return sent, waited


def test_no_advice_is_no_limit():
    pacer = Pacer()
    sent, waited = drive(pacer, 0.0, 1.0, batch=512, batch_s=0.01)
    assert waited == 0.0 and sent == 512 * 100 and pacer.rate(0.5) == 0.0


def test_a_fast_actor_sends_its_share_of_the_budget():
    pacer = Pacer()
    pacer.advise(0.0, pace_per_s=20_000.0, streams=2)  # a share of 10,000/s for an actor that could do 51,200/s
    sent, waited = drive(pacer, 0.0, 1.0, batch=512, batch_s=0.01)
    assert pacer.rate(0.5) == 10_000.0
    assert 9_000 <= sent <= 11_000 and waited > 0.5


def test_a_slow_actor_never_waits():
    pacer = Pacer()
    pacer.advise(0.0, pace_per_s=100_000.0, streams=1)
    sent, waited = drive(pacer, 0.0, 1.0, batch=512, batch_s=0.01)  # 51,200/s, under its share
    assert waited == 0.0 and sent == 512 * 100


def test_advice_expires_without_new_versions():
    pacer = Pacer(min_ttl_s=2.0)
    pacer.advise(0.0, 1_000.0, 1)
    assert pacer.rate(1.9) == 1_000.0 and pacer.rate(2.1) == 0.0
    pacer.spend(1.0, 10_000)  # deep in debt, then the learner goes quiet
    assert pacer.wait_s(1.0) == MAX_SLICE_S
    assert pacer.wait_s(2.5) == 0.0  # an absent learner holds no actor back


def test_the_time_to_live_follows_the_interval_between_versions():
    pacer = Pacer(min_ttl_s=2.0)
    for version in range(10):  # a slow learner: a version every 5 s
        pacer.advise(5.0 * version, 1_000.0, 1)
    assert pacer.rate(45.0 + 10.0) == 1_000.0 and pacer.rate(45.0 + 25.0) == 0.0


def test_zero_advice_lifts_the_limit_and_forgets_the_debt():
    pacer = Pacer()
    pacer.advise(0.0, 1_000.0, 1)
    pacer.spend(0.0, 5_000)
    assert pacer.wait_s(0.0) > 0
    pacer.advise(0.1, 0.0, 1)
    assert pacer.wait_s(0.1) == 0.0
    pacer.advise(0.2, 1_000.0, 1)  # a budget again: the old debt is gone
    assert pacer.wait_s(0.2) == 0.0


def test_an_idle_actor_saves_up_only_a_short_burst():
    pacer = Pacer(burst_s=0.25)
    pacer.advise(0.0, 1_000.0, 1)
    pacer.spend(0.0, 0)
    pacer.advise(1.5, 1_000.0, 1)  # idle for 1.5 s: at most 250 tokens saved
    pacer.spend(1.5, 250)
    assert pacer.wait_s(1.5) == 0.0
    pacer.spend(1.5, 100)
    assert pacer.wait_s(1.5) == MAX_SLICE_S  # 100 transitions of debt at 1,000/s: 0.1 s, in slices
    assert pacer.wait_s(1.57) == pytest.approx(0.03)


def test_streams_zero_is_one_share():
    pacer = Pacer()
    pacer.advise(0.0, 3_000.0, 0)
    assert pacer.rate(0.0) == 3_000.0


# ------------------------------------------------------------------ the learner's estimate


def run_learner(
    meter: PaceMeter,
    start: float,
    seconds: float,
    update_s: float,
    per_update: float,
    idle_s: float = 0.0,
    fill: float = FILL_TARGET,
) -> float:
    """A learner loop whose updates take `update_s`, with `idle_s` starved between them, its buffer `fill`
    full; returns the clock."""
    now = start
    while now < start + seconds:
        if idle_s:
            now += idle_s
            meter.tick(now, 0.0, starved=True, fill=fill)
        now += update_s
        meter.tick(now, per_update, starved=False, fill=fill)
    return now


def test_consumption_is_per_busy_second():
    meter = PaceMeter(headroom=1.2, window_s=1.0)
    meter.heard("actor-0", 0.0)
    meter.tick(0.0, 0.0, starved=False)
    now = run_learner(meter, 0.0, 3.0, update_s=0.01, per_update=64.0)
    assert meter.rate_per_s == pytest.approx(6_400.0, rel=0.01)
    per_s, streams = meter.advice(now, filling=False)
    assert per_s == pytest.approx(1.2 * 6_400.0, rel=0.01) and streams == 1


def test_starvation_does_not_lower_the_rate():
    meter = PaceMeter(headroom=1.0, window_s=1.0)
    meter.tick(0.0, 0.0, starved=False)
    run_learner(meter, 0.0, 3.0, update_s=0.01, per_update=64.0, idle_s=0.0025)  # starved 20% of the time
    assert meter.rate_per_s == pytest.approx(6_400.0, rel=0.01)
    assert meter.starved_share == pytest.approx(0.2, abs=0.02)


@pytest.mark.parametrize("fill,factor", [(0.0, 1.4), (0.25, 1.15), (0.4, 1.0), (1.0, 0.4), (3.0, 0.4)])
def test_a_full_buffer_lowers_the_budget_and_an_empty_one_raises_it(fill, factor):
    meter = PaceMeter(headroom=1.1, window_s=1.0)
    meter.tick(0.0, 0.0, starved=False, fill=fill)
    now = run_learner(meter, 0.0, 3.0, update_s=0.01, per_update=64.0, fill=fill)
    assert meter.advice(now, filling=False)[0] == pytest.approx(1.1 * 6_400.0 * factor, rel=0.01)


def test_the_controller_settles_below_the_drop_zone():
    # Arrivals at the budget fill the buffer while they exceed consumption, drain it while they fall short.
    meter, fill, now = PaceMeter(headroom=1.1, window_s=1.0), 0.0, 0.0
    meter.tick(now, 0.0, starved=False, fill=fill)
    for _ in range(60):
        now = run_learner(meter, now, 1.0, update_s=0.01, per_update=64.0, fill=fill)
        arrivals = meter.advice(now, filling=False)[0]
        fill = min(1.0, max(0.0, fill + 0.2 * (arrivals / 6_400.0 - 1.0)))
    assert 0.4 < fill < 0.6


def test_no_limit_while_mostly_starved_filling_or_unmeasured():
    meter = PaceMeter(headroom=1.2, window_s=1.0)
    assert meter.advice(0.0, filling=False)[0] == 0.0  # no estimate yet
    meter.tick(0.0, 0.0, starved=False)
    now = run_learner(meter, 0.0, 3.0, update_s=0.01, per_update=64.0)
    assert meter.advice(now, filling=True)[0] == 0.0
    assert PaceMeter(headroom=0.0).advice(now, filling=False)[0] == 0.0
    now = run_learner(meter, now, 3.0, update_s=0.01, per_update=64.0, idle_s=0.09)  # starved 90% of the time
    assert meter.starved_share > STARVED_SHARE_MAX
    assert meter.advice(now, filling=False)[0] == 0.0


def test_the_slow_first_updates_do_not_count():
    meter = PaceMeter(headroom=1.0, window_s=1.0)
    meter.tick(0.0, 0.0, starved=False)
    for t in (2.0, 2.5, 2.6):  # the first optimizer steps: seconds each
        meter.tick(t, 100.0, starved=False)
    run_learner(meter, 2.6, 2.0, update_s=0.02, per_update=100.0)
    assert meter.rate_per_s == pytest.approx(5_000.0, rel=0.01)


def test_warm_up_is_neither_busy_nor_starved():
    meter = PaceMeter(headroom=1.0, window_s=1.0)
    meter.tick(0.0, 0.0, starved=False)
    meter.tick(5.0, 0.0, starved=False)  # importing, not training
    now = run_learner(meter, 5.0, 2.0, update_s=0.02, per_update=100.0)
    assert meter.starved_share == 0.0 and meter.rate_per_s == pytest.approx(5_000.0, rel=0.01)
    assert meter.advice(now, filling=False)[0] == pytest.approx(5_000.0, rel=0.01)


def test_streams_not_heard_from_lately_drop_out():
    meter = PaceMeter(headroom=1.0, stream_ttl_s=5.0)
    meter.heard("actor-0", 0.0)
    meter.heard("actor-1", 4.0)
    assert meter.stream_count(4.0) == 2 and meter.stream_count(6.0) == 1 and meter.stream_count(10.0) == 0


def test_consumed_per_update_follows_the_algorithm():
    config = RunConfig()
    config.algorithm.batch_size, config.learner.samples_per_insert = 256, 4.0
    assert consumed_per_update(config, replay=True) == 64.0
    assert consumed_per_update(config, replay=False) == 256.0
