"""`tandem bench intake`: a real learner's samples/s alone and while senders flood it, against its model's limit."""

from __future__ import annotations

import copy
import dataclasses
import multiprocessing as mp
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click
import gymnasium as gym
import numpy as np
import torch
import zmq

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.bench.transport import START_TIMEOUT_S, end_process, tandem_send_loop
from tandem.client.bench.transport_figures import machine
from tandem.client.bench.transport_payloads import JOIN, make_batch
from tandem.protocol import sockets

TARGET_SHARE = 0.8  # the learner keeps at least this share of its no-intake update rate under a flood
# name -> (env.id, model.kind, algorithm.batch_size, transport payload the senders flood with)
MODELS = {
    "cartpole": ("CartPole-v1", "mlp", 256, "cartpole"),
    "atari": ("tandem.client.bench.intake:atari_like_env", "nature_cnn", 32, "atari"),
}
MODES = ("no_intake", "no_intake_no_prefetch", "flood_thread", "flood_inline")
REPLAY_CAPACITY = 20_000


class AtariLikeEnv(gym.Env):
    """Spaces of a frame-stacked Atari game (4 x 84 x 84 uint8, 6 actions); the learner only probes them."""

    observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = gym.spaces.Discrete(6)

    def reset(self, *, seed=None, options=None):
        return np.zeros(self.observation_space.shape, np.uint8), {}

    def step(self, action):
        return np.zeros(self.observation_space.shape, np.uint8), 0.0, False, False, {}


def atari_like_env(**_kwargs) -> gym.Env:
    return AtariLikeEnv()


def default_device() -> str:
    return "cuda:0" if torch.cuda.is_available() else "cpu"


# --------------------------------------------------------------------------------------------- senders


def run_sender(endpoint: str, payload: str, index: int, stop) -> None:
    """Child: flood the learner with batches of its own stream (seq rising), joined as an actor's backlog joins them."""
    batch = dataclasses.replace(make_batch(payload), policy_id="default", actor_id=f"flood-{index}")
    ctx = zmq.Context()
    try:
        tandem_send_loop(ctx, endpoint, batch, stop, JOIN["tandem"])
    finally:
        ctx.destroy(linger=0)


# --------------------------------------------------------------------------------------------- learner


def make_learner(model: str, device: str, tmp: str, mode: str):
    from tandem.daemons.config import load_config
    from tandem.daemons.learner.daemon import Learner
    from tandem.daemons.runtime.signals import StopFlag

    env_id, kind, batch_size, _ = MODELS[model]
    overrides = [
        f"run.dir='{tmp}/{model}-{mode}'",
        f"env.id='{env_id}'",
        f"model.kind='{kind}'",
        f"algorithm.batch_size={batch_size}",
        f"learner.device='{device}'",
        f"learner.replay_capacity={REPLAY_CAPACITY}",
        f"learner.replay_min_size={4 * batch_size}",
        "learner.max_lag=1000000000",
        "learner.samples_per_insert=4.0",
        f"learner.intake_thread={'false' if mode == 'flood_inline' else 'true'}",
        f"learner.prefetch={'false' if mode == 'no_intake_no_prefetch' else 'true'}",
    ]
    base = Path(tmp) / "base.toml"
    base.write_text("[run]\nname = 'bench-intake'\n")
    config = load_config(base, overrides)
    learner = Learner(config, "default", StopFlag(), control_endpoint=None, device=device)
    learner.build()
    learner.binding.bind()
    return learner


def prefill(learner, payload: str, flood: bool) -> None:
    """Fill replay past its minimum with one stream of batches, on this thread, before the clock starts.

    A flooded learner then keeps its limiter as in a run: it inserts what the ratio allows and reads,
    decodes, checks and drops (counted) the rest. With nothing coming in, the limiter would stop training
    once replay's data had been sampled samples_per_insert times: there every update may run.
    """
    limiter = learner.training.feed.limiter
    kept = limiter.error_buffer
    limiter.error_buffer = float("inf")
    batch = dataclasses.replace(make_batch(payload), policy_id="default", actor_id="prefill")
    seq = 0
    while len(learner.training.feed.replay) < learner.config.learner.replay_min_size * 2:
        learner.intake.handle(dataclasses.replace(batch, seq=seq).to_frames())
        seq += 1
    if flood:
        limiter.error_buffer, limiter.inserted, limiter.sampled = kept, 0, 0


def measure_learner(model: str, device: str, mode: str, senders: int, warmup_s: float, duration_s: float) -> dict:
    """Samples/s of a real learner loop (train, publish, report) in `mode`, and what its intake took meanwhile."""
    _, _, batch_size, payload = MODELS[model]
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="tb-intake-") as tmp:
        learner = make_learner(model, device, tmp, mode)
        prefill(learner, payload, flood=mode.startswith("flood"))
        stop = ctx.Event()
        procs = []
        if mode.startswith("flood"):
            for i in range(senders):
                proc = ctx.Process(
                    target=run_sender, args=(learner.binding.endpoints["transitions"], payload, i, stop), daemon=True
                )
                proc.start()
                procs.append(proc)
        runner = threading.Thread(target=learner.loop, name="learner", daemon=True)
        runner.start()
        try:
            before = wait_started(learner, procs, warmup_s)
            start = time.monotonic()
            time.sleep(duration_s)
            after, elapsed = dict(learner.progress.counts), time.monotonic() - start
        finally:
            learner.stop.requested = True
            runner.join(START_TIMEOUT_S)
            stop.set()
            for proc in procs:
                end_process(proc)
            learner.metrics.close()
            sockets.close_context(learner.runtime.ctx, 0)
    updates = after["updates"] - before["updates"]
    received = after["batches_received"] - before["batches_received"]
    return {
        "mode": mode,
        "senders": len(procs),
        "updates": updates,
        "samples_per_s": round(updates * batch_size / elapsed, 1),
        "batches_received_per_s": round(received / elapsed, 1),
        "transitions_inserted_per_s": round((after["transitions_inserted"] - before["transitions_inserted"]) / elapsed),
        "batches_over_ratio_per_s": round((after["batches_over_ratio"] - before["batches_over_ratio"]) / elapsed, 1),
        "batches_malformed": after["batches_malformed"],
        "intake_errors": after["intake_errors"],
    }


def wait_started(learner, procs, warmup_s: float) -> dict:
    """Wait for the first update (and, when flooding, the first flooded batch), then warm up; counts at the start."""
    deadline = time.monotonic() + START_TIMEOUT_S
    counts = learner.progress.counts
    received = counts["batches_received"]
    while counts["updates"] == 0 or (procs and counts["batches_received"] == received):
        if time.monotonic() > deadline:
            raise RuntimeError("the learner did not start training (or receiving) in time")
        time.sleep(0.01)
    time.sleep(warmup_s)
    return dict(counts)


# ---------------------------------------------------------------------------------------------- limits


def model_limits(model: str, device: str, duration_s: float) -> dict:
    """Samples/s of the same model on random tensors already on the device: one forward+backward+Adam step,
    and the whole Double DQN update (three forward passes, backward, step, priorities back to the host)."""
    from tandem.daemons.replay import SampledBatch

    with tempfile.TemporaryDirectory(prefix="tb-intake-") as tmp:
        learner = make_learner(model, device, tmp, "limit")
        try:
            algo, batch_size = learner.training.algorithm, learner.config.algorithm.batch_size
            dev = torch.device(device)
            obs_space = AtariLikeEnv.observation_space if model == "atari" else gym.spaces.Box(-1, 1, (4,), np.float32)
            rng = np.random.default_rng(0)
            obs = torch.as_tensor(np.stack([obs_space.sample() for _ in range(batch_size)]), device=dev)
            net = copy.deepcopy(algo.online)
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)

            def fbs() -> None:
                loss = net(obs).square().mean()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

            sample = SampledBatch(
                obs=obs,
                actions=rng.integers(0, 2, batch_size),
                returns=torch.rand(batch_size, device=dev),
                next_obs=obs.clone(),
                discounts=torch.full((batch_size,), 0.97, device=dev),
                versions=np.zeros(batch_size, np.int64),
                indices=np.arange(batch_size),
                weights=torch.ones(batch_size, device=dev),
            )
            return {
                "forward_backward_step_samples_per_s": round(rate(fbs, dev, duration_s) * batch_size, 1),
                "update_on_device_samples_per_s": round(
                    rate(lambda: algo.update(sample), dev, duration_s) * batch_size, 1
                ),
            }
        finally:
            learner.metrics.close()
            sockets.close_context(learner.runtime.ctx, 0)


def rate(step, dev: torch.device, duration_s: float) -> float:
    """Calls per second of `step`, after a few untimed ones; on CUDA the clock stops when the device is done."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(3):
        step()
    sync()
    count, start = 0, time.monotonic()
    while time.monotonic() - start < duration_s:
        step()
        count += 1
    sync()
    return count / (time.monotonic() - start)


# ---------------------------------------------------------------------------------------------- command


@click.command("intake")
@click.option("--device", default=None, help="Learner device.  [default: cuda:0 when a GPU exists, else cpu]")
@click.option("--senders", default=4, show_default=True, help="Flooding sender processes.")
@click.option("--seconds", default=5.0, show_default=True, help="Timed length of each learner run.")
@json_option
@quick_option("2 senders, 1 s runs")
def intake_cmd(device: str | None, senders: int, seconds: float, as_json: bool, quick: bool) -> None:
    """A learner's samples/s alone and flooded by senders (receiver thread vs inline), against its model's limit."""
    device = device or default_device()
    senders, warmup_s, duration_s = (2, 0.3, 1.0) if quick else (max(1, senders), 1.0, seconds)
    say, results = progress(as_json), {}
    for model in MODELS:
        runs = {mode: measure_learner(model, device, mode, senders, warmup_s, duration_s) for mode in MODES}
        base = max(runs["no_intake"]["samples_per_s"], 1e-9)
        share = {mode: round(runs[mode]["samples_per_s"] / base, 3) for mode in ("flood_thread", "flood_inline")}
        limits = model_limits(model, device, duration_s)
        results[model] = {
            "runs": runs,
            "limits": limits,
            "share_kept": share,
            "no_intake_over_limit": round(base / max(limits["update_on_device_samples_per_s"], 1e-9), 3),
        }
        for line in model_lines(model, results[model]):
            say(line)
    met = {model: r["share_kept"]["flood_thread"] >= TARGET_SHARE for model, r in results.items()}
    record = {
        "benchmark": "intake",
        "quick": quick,
        "device": device,
        "senders": senders,
        "duration_s": duration_s,
        "machine": machine(),
        "results": results,
        "target": {"share_kept_min": TARGET_SHARE},
        "met": met,
    }
    finish(record, as_json, [])


def model_lines(model: str, figures: dict) -> Iterator[str]:
    """One model's figures for people: each run's rates, the model's limits, and the shares kept."""
    limits = figures["limits"]
    for mode, r in figures["runs"].items():
        yield (
            f"{model:9s} {mode:22s} {r['samples_per_s']:10.1f} samples/s  "
            f"{r['batches_received_per_s']:8.1f} batches/s received  {r['senders']} senders"
        )
    yield f"{model:9s} {'limit: fwd+bwd+step':22s} {limits['forward_backward_step_samples_per_s']:10.1f} samples/s"
    yield f"{model:9s} {'limit: update on device':22s} {limits['update_on_device_samples_per_s']:10.1f} samples/s"
    for mode, value in figures["share_kept"].items():
        yield (
            f"{model:9s} share kept, {mode:12s} {value:6.2f}  "
            f"({'met' if value >= TARGET_SHARE else 'NOT met'}, target >= {TARGET_SHARE})"
        )
