"""`tandem bench replay`: cost of ReplayBuffer.sample(256) at 10k, 100k and 1M slots, uniform and prioritized;
bytes per Atari transition in replay and on the wire, whole stacks against frames stored and sent once."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time

import click
import numpy as np

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.daemons.replay import FrameReplay, NStepTransitions, ReplayBuffer
from tandem.protocol import TransitionBatch

CAPACITIES = (10_000, 100_000, 1_000_000)
KINDS = ("uniform", "prioritized")
BATCH = 256
OBS_SHAPE = (4,)  # CartPole-like
CHUNK = 100_000  # transitions per add() and per update_priorities() while filling
TARGET_RATIO = 1.5
ATARI_STACK, ATARI_FRAME = 4, (84, 84)  # Pong's [4, 84, 84] uint8 observations
ATARI_STEPS, ATARI_ENVS = 32, 8  # examples/pong_appo.toml's unroll


def make_transitions(count: int, rng: np.random.Generator) -> NStepTransitions:
    """`count` random n-step transitions built directly with numpy (no accumulator)."""
    return NStepTransitions(
        obs=rng.standard_normal((count, *OBS_SHAPE), dtype=np.float32),
        actions=rng.integers(0, 2, count, dtype=np.int64),
        returns=rng.standard_normal(count, dtype=np.float32),
        next_obs=rng.standard_normal((count, *OBS_SHAPE), dtype=np.float32),
        discounts=np.full(count, 0.99**3, np.float32),
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
    return {
        "kind": kind,
        "capacity": capacity,
        "median_us": round(statistics.median(runs), 2),
        "runs_us": [round(r, 2) for r in runs],
    }


def ratios(results: list[dict]) -> dict[str, float]:
    """Median cost at the largest capacity over that at the smallest, per kind."""
    med = {(r["kind"], r["capacity"]): r["median_us"] for r in results}
    return {k: round(med[(k, CAPACITIES[-1])] / med[(k, CAPACITIES[0])], 3) for k in KINDS}


def atari_batch(seq: int, rng: np.random.Generator, end_prob: float = 0.01) -> TransitionBatch:
    """A stacked batch as an Atari actor sends it (PROTOCOL.md 2.1.2): newest frames, obs[0]'s history, some ends."""
    steps, envs = ATARI_STEPS, ATARI_ENVS
    ends = rng.random((steps, envs))
    truncated = ends < end_prob / 4
    return TransitionBatch(
        policy_id="default",
        actor_id="actor-0",
        incarnation=0,
        seq=seq,
        policy_version=0,
        env_steps=0,
        obs=rng.integers(0, 255, (steps + 1, envs, *ATARI_FRAME), np.uint8),
        actions=rng.integers(0, 6, (steps, envs)),
        rewards=np.zeros((steps, envs), np.float32),
        terminated=ends < end_prob,
        truncated=truncated,
        final_obs=rng.integers(0, 255, (int(truncated.sum()), *ATARI_FRAME), np.uint8),
        obs_stack=ATARI_STACK,
        obs_history=rng.integers(0, 255, (envs, ATARI_STACK - 1, *ATARI_FRAME), np.uint8),
    )


def atari_bytes(batches: int) -> dict:
    """Bytes per transition of Pong-shaped data: replay rows with whole stacks (obs and next_obs) against the frame
    replay fed `batches` stacked batches (frames written per transition measured), and wire bytes per step."""
    shape = (ATARI_STACK, *ATARI_FRAME)
    whole = ReplayBuffer(1, shape, np.uint8, (), np.int64)
    capacity = batches * ATARI_STEPS * ATARI_ENVS
    frames = FrameReplay(capacity, shape, np.uint8, (), np.int64, n=3, gamma=0.99)
    rng = np.random.default_rng(0)
    sent_whole = sent_frames = 0
    for seq in range(batches):
        batch = atari_batch(seq, rng)
        frames.add(batch)
        sent_frames += sum(len(f) for f in batch.to_frames()[1:])
        sent_whole += (batch.obs.nbytes + batch.final_obs.nbytes) * ATARI_STACK + sum(
            a.nbytes for a in (batch.actions, batch.rewards, batch.terminated, batch.truncated)
        )
    frame_bytes = int(np.prod(ATARI_FRAME))
    written = frames.written * frame_bytes / frames.total_added + frames.rows.row_bytes
    steps = batches * ATARI_STEPS * ATARI_ENVS
    return {
        "obs_shape": list(shape),
        "whole_stacks_bytes": whole.row_bytes,
        "frames_once_bytes": round(written, 1),
        "frames_once_allocated_bytes_at_1m": round(
            (1_000_000 + 1_000_000 // 16 + 1024) * frame_bytes / 1_000_000 + frames.rows.row_bytes, 1
        ),
        "replay_ratio": round(written / whole.row_bytes, 3),
        "wire_whole_bytes_per_step": round(sent_whole / steps, 1),
        "wire_frames_bytes_per_step": round(sent_frames / steps, 1),
        "wire_ratio": round(sent_frames / sent_whole, 3),
    }


@click.command("replay")
@json_option
@quick_option("3 repeats of 50 samples")
@click.option("--repeats", default=7, show_default=True, help="Timed measurements per (kind, capacity).")
def replay_cmd(as_json: bool, quick: bool, repeats: int) -> None:
    """Median microseconds per ReplayBuffer.sample(256) on full buffers; target: 1M costs <= 1.5x 10k."""
    samples = 50 if quick else 200
    repeats = 3 if quick else repeats
    say, results = progress(as_json), []
    for kind in KINDS:
        for capacity in CAPACITIES:
            results.append(r := measure(kind, capacity, samples, repeats))
            say(f"{kind:12s} {capacity:>9,d}  {r['median_us']:9.1f} us/sample  (runs {r['runs_us']})")
    rat = ratios(results)
    met = {k: rat[k] <= TARGET_RATIO for k in KINDS}
    atari = atari_bytes(4 if quick else 40)
    record = {
        "benchmark": "replay",
        "quick": quick,
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "batch_size": BATCH,
        "samples_per_run": samples,
        "results": results,
        "ratios": rat,
        "target": {"ratio_1m_to_10k_max": TARGET_RATIO},
        "met": met,
        "atari_bytes_per_transition": atari,
    }
    verdicts = [
        f"{k}: 1M/10k = {rat[k]:.2f} (target <= {TARGET_RATIO:g}): {'met' if met[k] else 'NOT met'}" for k in KINDS
    ]
    sizes = (
        f"Atari {atari['obs_shape']} uint8, bytes per transition in replay: whole stacks "
        f"{atari['whole_stacks_bytes']}, frames once {atari['frames_once_bytes']} ({atari['replay_ratio']}x; "
        f"{atari['frames_once_allocated_bytes_at_1m']} allocated at 1M); on the wire per step: "
        f"{atari['wire_whole_bytes_per_step']} -> {atari['wire_frames_bytes_per_step']} ({atari['wire_ratio']}x)"
    )
    finish(record, as_json, [*verdicts, sizes])
