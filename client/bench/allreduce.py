"""`tandem bench allreduce`: a replica group's gradient all-reduce alone, overlapped with backward and after it.

N member processes on loopback form a group as learner replicas do (ReplicaGroup, Gloo, or NCCL on CUDA) and take
optimizer steps of the Nature CNN on one fixed Atari-sized batch through the algorithms' `gradient_step`: no
actors, no intake, so the comparison is the all-reduce's and nothing else's. Rounds alternate the two ways; each
figure is the median over rounds of a member's per-step mean.
"""

from __future__ import annotations

import datetime
import multiprocessing
import statistics
import time

import click

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.bench.transport_figures import machine
from tandem.client.member_processes import results_of

WARMUP_STEPS = 3
WAIT_S = 600.0  # longest the command waits for one round's members


def member(rank: int, size: int, port: int, tag: str, spec: dict, out) -> None:
    """One member: join, take the steps, put its figures on `out` (or what went wrong)."""
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.distributed as dist

    from tandem.daemons.algorithms.adam import Adam
    from tandem.daemons.algorithms.gradient_step import gradient_step
    from tandem.daemons.algorithms.models import NatureCNN
    from tandem.daemons.learner.replica_group import Place, ReplicaGroup
    from tandem.daemons.learner.replica_join import backend_for, indexed

    try:
        torch.set_num_threads(spec["threads"])
        device = torch.device(spec["device"])
        backend = backend_for("auto", device)
        if backend == "nccl":
            device = indexed(device)
        timeout = datetime.timedelta(seconds=60)
        store = dist.TCPStore("127.0.0.1", port, size, is_master=False, timeout=timeout)
        options = {"device_id": device} if backend == "nccl" else {}
        dist.init_process_group(
            backend, store=dist.PrefixStore(tag, store), rank=rank, world_size=size, timeout=timeout, **options
        )
        counts: dict[str, float] = {}
        group = ReplicaGroup(
            Place(rank, size, 1, f"127.0.0.1:{port}", backend),
            60.0,
            counts,
            device=device,
            bucket_bytes=spec["bucket_kb"] * 1024,
            overlap=spec["overlap"],
        )
        group.install()
        torch.manual_seed(0)
        space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        net = NatureCNN(space.shape, 6, False, scale=True).to(device)
        optimizer = Adam(net.parameters(), lr=1e-4)
        obs = torch.randint(0, 256, (spec["batch"], 4, 84, 84), dtype=torch.uint8, device=device)
        for step in range(WARMUP_STEPS + spec["steps"]):
            if step == WARMUP_STEPS:
                group.agree(True, False)  # start the timed steps together
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                start, before = time.perf_counter(), dict(counts)
            gradient_step(optimizer, net(obs).pow(2).mean(), net.parameters(), 0.5)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        spent, steps = time.perf_counter() - start, spec["steps"]
        buckets = counts["gradient_buckets"] - before["gradient_buckets"]
        out.put(
            {
                "rank": rank,
                "step_ms": 1000 * spent / steps,
                "held_ms": 1000 * (counts["gradient_allreduce_s"] - before["gradient_allreduce_s"]) / steps,
                "kb_per_step": (counts["gradient_allreduce_bytes"] - before["gradient_allreduce_bytes"]) / 1024 / steps,
                "buckets_per_step": buckets / steps,
                "done_in_backward": (counts["gradient_buckets_early"] - before["gradient_buckets_early"])
                / max(buckets, 1),
            }
        )
        group.close()
    except BaseException as exc:  # the command reads it instead of waiting for figures that never come
        out.put({"rank": rank, "error": f"{type(exc).__name__}: {exc}"})


def one_round(size: int, spec: dict, tag: str) -> dict:
    """Every member's figures of one round, run in processes of their own (spawned: no inherited torch state)."""
    import torch.distributed as dist

    store = dist.TCPStore(
        "127.0.0.1", 0, size, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60)
    )
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=member, args=(rank, size, store.port, tag, spec, out)) for rank in range(size)]
    figures = results_of(procs, out, WAIT_S, grace_s=30.0)
    errors = [f["error"] for f in figures if "error" in f]
    if errors:
        raise click.ClickException(f"a member of the group failed: {errors[0]}")
    # the group is as fast as its slowest member
    return {key: max(f[key] for f in figures) for key in figures[0] if key != "rank"}


@click.command("allreduce")
@click.option("--members", type=click.IntRange(min=1), default=2, show_default=True, help="Processes in the group.")
@click.option("--device", default="cpu", show_default=True, help="Each member's device ('cuda': NCCL, one GPU each).")
@click.option("--batch", type=click.IntRange(min=1), default=256, show_default=True, help="Samples per step.")
@click.option("--steps", type=click.IntRange(min=1), default=8, show_default=True, help="Timed steps per round.")
@click.option("--rounds", type=click.IntRange(min=1), default=5, show_default=True, help="Rounds of each way.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="Torch threads a member.")
@click.option("--bucket-kb", type=click.IntRange(min=1), default=1024, show_default=True, help="Bucket size.")
@json_option
@quick_option("one round of 2 steps each way, a batch of 32")
def allreduce_cmd(
    members: int,
    device: str,
    batch: int,
    steps: int,
    rounds: int,
    threads: int,
    bucket_kb: int,
    as_json: bool,
    quick: bool,
) -> None:
    """A group's gradient all-reduce alone (the Nature CNN, one fixed batch, no actors): the time a step is held
    up by it, overlapped with backward and after it, in alternating rounds; medians over rounds."""
    if quick:
        batch, steps, rounds = min(batch, 32), min(steps, 2), 1
    say = progress(as_json)
    ways = {"after": False, "overlapped": True}
    taken: dict[str, list[dict]] = {way: [] for way in ways}
    for index in range(rounds):
        for way, overlap in ways.items():
            spec = {
                "device": device,
                "batch": batch,
                "steps": steps,
                "threads": threads,
                "bucket_kb": bucket_kb,
                "overlap": overlap,
            }
            got = one_round(members, spec, f"bench/{index}/{way}")
            taken[way].append(got)
            say(
                f"round {index + 1} {way}: step {got['step_ms']:.1f} ms, held by the all-reduce "
                f"{got['held_ms']:.1f} ms ({got['kb_per_step']:.0f} KiB in {got['buckets_per_step']:.1f} buckets, "
                f"{100 * got['done_in_backward']:.0f}% done within backward)"
            )
    medians = {
        way: {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]} for way, runs in taken.items()
    }
    after, overlapped = medians["after"], medians["overlapped"]
    ratios = {
        "held_overlapped_over_after": round(overlapped["held_ms"] / max(after["held_ms"], 1e-9), 3),
        "step_overlapped_over_after": round(overlapped["step_ms"] / max(after["step_ms"], 1e-9), 3),
    }
    record = {
        "benchmark": "allreduce",
        "quick": quick,
        "members": members,
        "device": device,
        "batch": batch,
        "steps": steps,
        "rounds": rounds,
        "threads": threads,
        "bucket_kb": bucket_kb,
        "medians": medians,
        "ratios": ratios,
        "machine": machine(),
    }
    finish(
        record,
        as_json,
        [
            f"held by the all-reduce per step: {overlapped['held_ms']:.1f} ms overlapped, {after['held_ms']:.1f} ms "
            f"after backward ({ratios['held_overlapped_over_after']}x); step {overlapped['step_ms']:.1f} ms against "
            f"{after['step_ms']:.1f} ms ({ratios['step_overlapped_over_after']}x); medians of {rounds} round(s)"
        ],
    )
