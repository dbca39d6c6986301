"""`tandem bench learner`: a real learner's own work per sample (intake, stack rebuilding, targets, minibatches,
copies, publishing) on Atari-shaped APPO unrolls and Double DQN replay, with a network of almost no compute."""

from __future__ import annotations

import cProfile
import dataclasses
import io
import json
import pstats
import statistics
import tempfile
import time

import click
import numpy as np
import torch
from torch import nn

from tandem.client.bench.examples import example_config
from tandem.client.bench.transport_figures import machine
from tandem.client.bench.transport_payloads import ActorUnrolls, make_batch
from tandem.protocol import sockets

ATARI_ENV = "tandem.client.bench.intake:atari_like_env"  # 4 x 84 x 84 uint8 stacks, 6 actions
# workload -> (example config whose learner is measured, overrides that keep its learning rule on a bench's memory
# and take the network's input normalization out with the network)
WORKLOADS = {
    "unrolls": ("pong_appo.toml", ["algorithm.normalize_images=false"]),  # APPO on Pong's unrolls
    "replay": ("breakout_dqn.toml", ["learner.replay_capacity=20000", "learner.replay_min_size=10000"]),  # DQN
}
PHASES = ("intake", "prepare", "compute", "publish")  # a learner's time split (time_split.py), intake apart
TINY_INPUTS = 8  # pixels the almost-no-compute network reads of each observation


class TinyNet(nn.Module):
    """A network of almost no compute: one linear layer over the first few values of each observation, so a
    learner's own work (everything but the network) is what a benchmark measures."""

    def __init__(self, num_actions: int):
        super().__init__()
        self.out = nn.Linear(TINY_INPUTS, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.out(obs.reshape(obs.shape[0], -1)[:, :TINY_INPUTS].float())


def tiny_net(obs_space, num_actions: int, model_cfg) -> nn.Module:
    """model.kind = "tandem.client.bench.learner_work:tiny_net"."""
    return TinyNet(num_actions)


# --------------------------------------------------------------------------------------------- the learner


def make_learner(workload: str, tmp: str, device: str, extra: list[str]):
    """The example's learner (its algorithm settings, its unroll and env shapes) on Atari-shaped spaces, built and
    bound as a daemon's is, with the tiny network."""
    from tandem.daemons.config import load_config
    from tandem.daemons.learner.daemon import Learner
    from tandem.daemons.runtime.signals import StopFlag

    name, overrides = WORKLOADS[workload]
    config = load_config(
        example_config(name),
        [
            f"run.dir='{tmp}/{workload}'",
            f"env.id='{ATARI_ENV}'",
            "env.kwargs={}",
            "env.atari.enabled=false",
            "model.kind='tandem.client.bench.learner_work:tiny_net'",
            f"learner.device='{device}'",
            "learner.max_lag=1000000000",  # pre-built unrolls all carry version 0
            "learner.intake_thread=false",
            "learner.prefetch=false",
            *overrides,
            *extra,
        ],
    )
    learner = Learner(config, "default", StopFlag(), control_endpoint=None, device=device)
    learner.build()
    learner.binding.bind()
    return learner


class Unrolls:
    """An actor's unrolls of the learner's shape (T steps of K envs of 4 x 84 x 84 stacks), in their wire form
    (frames sent once, PROTOCOL.md 2.1.2), one stream with rising seq; made outside the timed work."""

    def __init__(self, steps: int, envs: int, behaviour_logp: bool):
        batch = make_batch("atari", steps_envs=(steps, envs))  # an episode end and a truncation in each unroll
        extras = {"behaviour_logp": np.full((steps, envs), -1.79, np.float32)} if behaviour_logp else {}
        batch = dataclasses.replace(batch, policy_id="default", actor_id="bench-actor", extras=extras)
        self.actor, self.seq, self.per_unroll = ActorUnrolls(batch, 4), 0, steps * envs

    def next_message(self) -> list:
        unroll = self.actor.next(self.seq)
        self.seq += 1
        return dataclasses.replace(unroll, env_steps=self.seq * self.per_unroll).to_frames()


def prefill(learner, unrolls: Unrolls) -> None:
    """Past replay's minimum size (a replay feed), untimed: the measured updates sample as a run's do."""
    feed = learner.training.feed
    while feed.filling():
        learner.intake.handle(unrolls.next_message())


def measure(workload: str, device: str, updates: int, warmup: int, extra: list[str], profile: bool) -> dict:
    """Seconds per phase of each of `updates` learner updates (after `warmup` untimed ones), per sample."""
    with tempfile.TemporaryDirectory(prefix="tb-learner-") as tmp:
        learner = make_learner(workload, tmp, device, extra)
        try:
            return run_updates(learner, workload, updates, warmup, profile)
        finally:
            learner.metrics.close()
            learner.binding.close()
            sockets.close_context(learner.runtime.ctx, 0)  # its bound sockets go with it


def run_updates(learner, workload: str, updates: int, warmup: int, profile: bool) -> dict:
    cfg, training, intake, progress = learner.config, learner.training, learner.intake, learner.progress
    unrolls = Unrolls(cfg.actors.unroll_length, cfg.env.num_envs, behaviour_logp=workload == "unrolls")
    prefill(learner, unrolls)
    batch_size = cfg.algorithm.batch_size
    rows: list[dict[str, float]] = []
    profiler = cProfile.Profile() if profile else None
    for index in range(warmup + updates):
        times = dict.fromkeys(PHASES, 0.0)
        if profiler is not None and index == warmup:
            profiler.enable()
        while True:
            start = time.perf_counter()
            payload = training.next_payload(progress.version)
            times["prepare"] += time.perf_counter() - start
            if payload is not None:
                break
            message = unrolls.next_message()  # the actor's work: not timed
            start = time.perf_counter()
            intake.handle(message)
            times["intake"] += time.perf_counter() - start
        start = time.perf_counter()
        training.train(payload, progress.version)
        times["compute"] += time.perf_counter() - start
        start = time.perf_counter()
        if progress.counts["updates"] % training.feed.publish_every == 0:
            progress.version += 1
            learner.publish()
        times["publish"] += time.perf_counter() - start
        if index >= warmup:
            rows.append(times)
    if profiler is not None:
        profiler.disable()
    return summary(rows, batch_size, profiler, learner)


def summary(rows: list[dict[str, float]], batch_size: int, profiler, learner) -> dict:
    """Median microseconds per trained sample, per phase and in all (the median update's, not a sum of medians)."""
    per_sample = {p: statistics.median(r[p] for r in rows) / batch_size * 1e6 for p in PHASES}
    total = statistics.median(sum(r.values()) for r in rows) / batch_size * 1e6
    result = {
        "updates": len(rows),
        "batch_size": batch_size,
        "us_per_sample": round(total, 2),
        "phases_us_per_sample": {p: round(v, 2) for p, v in per_sample.items()},
        "samples_per_s": round(1e6 / total, 1),
        "malformed": int(learner.progress.counts["batches_malformed"]),
    }
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        result["profile"] = out.getvalue()
    return result


# ---------------------------------------------------------------------------------------------- command


@click.command("learner")
@click.option(
    "--workload",
    type=click.Choice([*WORKLOADS, "all"]),
    default="all",
    show_default=True,
    help="Unrolls: APPO on Pong-shaped unrolls (examples/pong_appo.toml's learner); replay: Double DQN on "
    "Breakout-shaped replay (examples/breakout_dqn.toml's); or both.",
)
@click.option("--device", default="cpu", show_default=True, help="Learner device.")
@click.option("--updates", default=20, show_default=True, help="Timed updates per workload (APPO: 1,024 samples).")
@click.option("--set", "extra", multiple=True, help="A config override for the learner, e.g. learner.augment=...")
@click.option("--profile", is_flag=True, help="Also print where the timed updates spent their time (cProfile).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="3 timed updates (a smoke run, not a figure to quote).")
def learner_cmd(
    workload: str, device: str, updates: int, extra: tuple[str, ...], profile: bool, as_json: bool, quick: bool
) -> None:
    """The learner's own work per sample, with a network of almost no compute: what intake, stack rebuilding,
    targets, minibatching, copies and publishing cost, the figure a faster learner is judged by."""
    updates, warmup = (3, 1) if quick else (max(1, updates), 3)
    names = list(WORKLOADS) if workload == "all" else [workload]
    results = {name: measure(name, device, updates, warmup, list(extra), profile) for name in names}
    record = {
        "benchmark": "learner",
        "quick": quick,
        "device": device,
        "overrides": list(extra),
        "machine": machine(),
        "results": {name: {k: v for k, v in r.items() if k != "profile"} for name, r in results.items()},
    }
    if as_json:
        click.echo(json.dumps(record))
        return
    for name, r in results.items():
        phases = "  ".join(f"{p} {v:.2f}" for p, v in r["phases_us_per_sample"].items())
        click.echo(
            f"{name:5s} {r['us_per_sample']:9.2f} us/sample ({r['samples_per_s']:,.0f} samples/s), median of "
            f"{r['updates']} updates of {r['batch_size']}; {phases}"
        )
        if "profile" in r:
            click.echo(r["profile"])
