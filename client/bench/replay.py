"""`tandem bench replay`: cost of ReplayBuffer.sample(256) at 10k, 100k and 1M slots, uniform and prioritized."""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import time

import click
import numpy as np

from daemons.replay import NStepTransitions, ReplayBuffer

CAPACITIES = (10_000, 100_000, 1_000_000)
KINDS = ("uniform", "prioritized")
BATCH = 256
OBS_SHAPE = (4,)  # CartPole-like
CHUNK = 100_000  # transitions per add() and per update_priorities() while filling
TARGET_RATIO = 1.5


def make_transitions(count: int, rng: np.random.Generator) -> NStepTransitions:
    """`count` random n-step transitions built directly with numpy (no accumulator)."""
    return NStepTransitions(
        obs=rng.standard_normal((count, *OBS_SHAPE), dtype=np.float32),
        actions=rng.integers(0, 2, count, dtype=np.int64),
        returns=rng.standard_normal(count, dtype=np.float32),
        next_obs=rng.standard_normal((count, *OBS_SHAPE), dtype=np.float32),
        discounts=np.full(count, 0.99 ** 3, np.float32),
        versions=np.zeros(count, np.int64),
    )


def filled_buffer(kind: str, capacity: int, seed: int = 0) -> ReplayBuffer:
    """A full buffer; prioritized ones get a random priority on every slot."""
    rng = np.random.default_rng(seed)
    buf = ReplayBuffer(capacity, OBS_SHAPE, np.float32, (), np.int64, prioritized=kind == "prioritized", seed=seed)
    for start in range(0, capacity, CHUNK):
        buf.add(make_transitions(min(CHUNK, capacity - start), rng))
    if buf.prioritized:
        for start in range(0, capacity, CHUNK):
            idx = np.arange(start, min(start + CHUNK, capacity))
            buf.update_priorities(idx, rng.exponential(1.0, idx.size))
    return buf


def time_samples(buf: ReplayBuffer, samples: int, repeats: int) -> list[float]:
    """Mean microseconds per sample(BATCH) call, one figure per repeat of `samples` calls."""
    for _ in range(10):  # warm-up: caches and lazily mapped pages
        buf.sample(BATCH)
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(samples):
            buf.sample(BATCH)
        runs.append((time.perf_counter() - started) / samples * 1e6)
    return runs


def measure(kind: str, capacity: int, samples: int, repeats: int) -> dict:
    buf = filled_buffer(kind, capacity)
    runs = time_samples(buf, samples, repeats)
    del buf
    gc.collect()  # free this buffer before the next, larger one
    return {"kind": kind, "capacity": capacity, "median_us": round(statistics.median(runs), 2),
            "runs_us": [round(r, 2) for r in runs]}


def ratios(results: list[dict]) -> dict[str, float]:
    """Median cost at the largest capacity over that at the smallest, per kind."""
    med = {(r["kind"], r["capacity"]): r["median_us"] for r in results}
    return {k: round(med[(k, CAPACITIES[-1])] / med[(k, CAPACITIES[0])], 3) for k in KINDS}


@click.command("replay")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="3 repeats of 50 samples (a smoke run, not a figure to quote).")
@click.option("--repeats", default=7, show_default=True, help="Timed measurements per (kind, capacity).")
def replay_cmd(as_json: bool, quick: bool, repeats: int) -> None:
    """Median microseconds per ReplayBuffer.sample(256) on full buffers; target: 1M costs <= 1.5x 10k."""
    samples = 50 if quick else 200
    repeats = 3 if quick else repeats
    results = []
    for kind in KINDS:
        for capacity in CAPACITIES:
            results.append(measure(kind, capacity, samples, repeats))
            if not as_json:
                r = results[-1]
                click.echo(f"{kind:12s} {capacity:>9,d}  {r['median_us']:9.1f} us/sample  (runs {r['runs_us']})")
    rat = ratios(results)
    met = {k: rat[k] <= TARGET_RATIO for k in KINDS}
    record = {"benchmark": "replay", "quick": quick,
              "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version(), "numpy": np.__version__},
              "batch_size": BATCH, "samples_per_run": samples, "results": results, "ratios": rat,
              "target": {"ratio_1m_to_10k_max": TARGET_RATIO}, "met": met}
    if as_json:
        click.echo(json.dumps(record))
        return
    for k in KINDS:
        click.echo(f"{k}: 1M/10k = {rat[k]:.2f} (target <= {TARGET_RATIO:g}): {'met' if met[k] else 'NOT met'}")
