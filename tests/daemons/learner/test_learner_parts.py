"""Pure parts of the learner: the samples-per-insert rate limiter and the version floor."""

from __future__ import annotations

from tandem.daemons.feeds.rate_limiter import RateLimiter
from tandem.daemons.learner.version_floor import read_floor, write_floor


def test_rate_limiter_holds_the_ratio():
    limiter = RateLimiter(samples_per_insert=2.0, min_size=100, error_buffer=64)
    assert limiter.can_insert(0) and not limiter.can_sample(50, 32)
    limiter.record_insert(120, 0)
    assert limiter.inserted == 0  # before the first sample everything is the initial fill
    assert limiter.can_sample(120, 32)
    limiter.record_sample(32)
    limiter.record_insert(20, 120)  # training began: these count
    assert limiter.inserted == 20
    sampled = 32
    while limiter.can_sample(140, 32):
        limiter.record_sample(32)
        sampled += 32
    # training stops once it is error_buffer ahead of 2 x inserted
    assert 2 * 20 + 64 - 32 < sampled <= 2 * 20 + 64
    # a flood of inserts is refused once the data is error_buffer ahead of training
    limiter.record_insert(1000, 120)
    assert not limiter.can_insert(1120)
    assert limiter.can_sample(1120, 32)


def test_rate_limiter_keeps_inserting_before_min_size():
    limiter = RateLimiter(samples_per_insert=1.0, min_size=1000, error_buffer=10)
    for size in range(0, 1000, 100):
        assert limiter.can_insert(size)
        limiter.record_insert(100, size)
    assert limiter.inserted == 0


def test_rate_limiter_takes_everything_until_training_starts():
    limiter = RateLimiter(samples_per_insert=4.0, min_size=100, error_buffer=64)
    for size in range(100, 10_000, 500):  # the learner is still warming up: nothing is refused
        assert limiter.can_insert(size)
        limiter.record_insert(500, size)
    assert limiter.inserted == 0 and limiter.can_sample(10_000, 32)
    limiter.record_sample(32)
    assert limiter.can_insert(10_000)  # 32 samples ahead of the data: inserts are wanted
    limiter.record_insert(1000, 10_000)
    assert limiter.inserted == 1000 and not limiter.can_insert(11_000)


def test_rate_limiter_fill_runs_from_starved_to_refusing():
    limiter = RateLimiter(samples_per_insert=1.0, min_size=0, error_buffer=100)
    limiter.record_sample(100)  # training began, 100 samples ahead of the data: sampling must wait
    assert limiter.fill() == 0.0 and not limiter.can_sample(1000, 1)
    limiter.record_insert(100, 1000)
    assert limiter.fill() == 0.5
    limiter.record_insert(100, 1100)
    assert limiter.fill() == 1.0 and limiter.can_insert(1200)
    limiter.record_insert(1, 1200)
    assert limiter.fill() == 1.0 and not limiter.can_insert(1201)


def test_version_floor(tmp_path):
    path = tmp_path / "version"
    assert read_floor(path) == -1
    write_floor(path, 41)
    assert read_floor(path) == 41
    path.write_text("garbage")
    assert read_floor(path) == -1
