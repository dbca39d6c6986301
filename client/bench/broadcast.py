"""`tandem bench broadcast`: publish-to-swapped latency of weight blobs vs raw PUB/SUB of the same bytes."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import statistics
import tempfile
import time

import click
import numpy as np
import psutil
import zmq

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.protocol import WeightBlob, sockets

SIZES = {"100KiB": 100 * 1024, "10MiB": 10 * 1024 * 1024, "100MiB": 100 * 1024 * 1024}
TARGET_RATIO = 1.5  # Tandem / raw at 10 MiB to 16 actors
ACK_TIMEOUT_S = 1.0  # a version not acked by all within this is re-sent (PUB may drop at its HWM)
ATTEMPTS = 3
START_TIMEOUT_S = 60.0
STALLED_RSS_MAX_BLOBS = 4.0  # publisher RSS growth while one subscriber is SIGSTOPped, in blobs


def blob_of(nbytes: int, version: int) -> WeightBlob:
    """A blob of `nbytes` float32 weights; fixed seed so both paths carry the same bytes."""
    weights = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32)
    return WeightBlob.build("bench", version, version, {"w": weights})


def subscriber(path: str, weights_ep: str, snapshot_ep: str, ack_ep: str, index: int) -> None:
    """Child: receive versions, verify (Tandem) or just take the frames (raw), ack each version."""
    ctx = zmq.Context()
    ack = ctx.socket(zmq.PUSH)
    ack.setsockopt(zmq.LINGER, 0)
    ack.connect(ack_ep)
    deadline = time.monotonic() + 600.0  # a child never outlives a lost parent by long
    try:
        if path == "tandem":
            from tandem.daemons.acting.weights_client import WeightsClient

            client = WeightsClient(ctx, "bench", weights_ep, snapshot_ep, f"sub{index}", refresh_s=3600.0)
            ack.send_json({"hello": index})
            while time.monotonic() < deadline:
                sockets.poll([client.sub], 200)
                blob = client.poll()
                if blob is not None:
                    current = blob  # the swap: the actor's reference now points at the new version
                    ack.send_json({"version": current.version, "index": index})
        else:
            sub = sockets.weights_sub(ctx, weights_ep)  # same socket options as Tandem's: only the codec differs
            ack.send_json({"hello": index})
            while time.monotonic() < deadline:
                if sub.poll(200, zmq.POLLIN):
                    frames = sub.recv_multipart(copy=False)
                    version = int.from_bytes(frames[0].bytes[:8], "little")
                    ack.send_json({"version": version, "index": index})
    finally:
        ctx.destroy(linger=0)


def start_subscribers(path: str, tmp: str, acks: zmq.Socket, actors: int, procs: list) -> None:
    """Start `actors` subscriber processes (into `procs`, which the caller ends) and wait until each said hello."""
    spawn = mp.get_context("spawn")
    for i in range(actors):
        p = spawn.Process(
            target=subscriber, args=(path, f"ipc://{tmp}/w", f"ipc://{tmp}/s", f"ipc://{tmp}/a", i), daemon=True
        )
        p.start()
        procs.append(p)
    hello = 0
    deadline = time.monotonic() + START_TIMEOUT_S
    while hello < actors:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{actors - hello} subscribers did not start")
        if acks.poll(1000):
            hello += "hello" in acks.recv_json()


def end_all(procs: list) -> None:
    for p in procs:
        if p.pid is not None:
            try:
                os.kill(p.pid, signal.SIGCONT)  # a stopped child cannot act on SIGTERM
            except ProcessLookupError:
                pass
        p.terminate()
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)


def run_path(path: str, nbytes: int, actors: int, versions: int) -> tuple[list[float], int]:
    """Publish `versions` versions to `actors` subscriber processes; seconds until all acked each one."""
    tmp = tempfile.mkdtemp(prefix="tandem-bcast-")
    ctx = zmq.Context()
    procs = []
    try:
        pub = sockets.weights_pub(ctx, f"ipc://{tmp}/w")  # both paths: same socket and HWM, only the codec differs
        snap = ctx.socket(zmq.ROUTER)  # requests are left unanswered: latency is measured on the PUB path
        snap.setsockopt(zmq.LINGER, 0)
        snap.bind(f"ipc://{tmp}/s")
        acks = ctx.socket(zmq.PULL)
        acks.setsockopt(zmq.LINGER, 0)
        acks.bind(f"ipc://{tmp}/a")
        start_subscribers(path, tmp, acks, actors, procs)
        base = blob_of(nbytes, 0)
        times, resends = [], 0
        for version in range(1, versions + 2):  # version 1 is the warm-up (connections, first allocation)
            if path == "tandem":
                blob = WeightBlob(base.policy_id, version, version, base.tensors, base.checksum)
                frames = blob.to_frames()
            else:
                frames = [version.to_bytes(8, "little"), base.tensors["w"]]
            seen: set[int] = set()
            t0 = time.perf_counter()
            for attempt in range(ATTEMPTS):
                if len(seen) == actors:
                    break
                resends += attempt > 0  # a lost version is re-sent and counted; the median keeps it from dominating
                sent_at = time.monotonic()
                sockets.send_frames(pub, frames)
                while len(seen) < actors and time.monotonic() - sent_at < ACK_TIMEOUT_S:
                    if acks.poll(100):
                        msg = acks.recv_json()
                        if msg.get("version") == version:
                            seen.add(msg["index"])
            if len(seen) < actors:
                raise RuntimeError(f"version {version} reached {len(seen)}/{actors} subscribers")
            if version > 1:
                times.append(time.perf_counter() - t0)
        return times, resends
    finally:
        end_all(procs)
        ctx.destroy(linger=0)
        shutil.rmtree(tmp, ignore_errors=True)


def stalled_subscriber_rss(nbytes: int, actors: int, versions: int) -> dict:
    """Publisher RSS growth, in blobs, over `versions` fresh versions while one of `actors` subscribers is stopped.

    Each version is a new array, as a learner's are, so a queue that kept old versions would show here."""
    tmp = tempfile.mkdtemp(prefix="tandem-bcast-stall-")
    ctx = zmq.Context()
    procs: list = []
    me = psutil.Process()
    try:
        pub = sockets.weights_pub(ctx, f"ipc://{tmp}/w")
        snap = ctx.socket(zmq.ROUTER)
        snap.setsockopt(zmq.LINGER, 0)
        snap.bind(f"ipc://{tmp}/s")
        acks = ctx.socket(zmq.PULL)
        acks.setsockopt(zmq.LINGER, 0)
        acks.bind(f"ipc://{tmp}/a")
        start_subscribers("tandem", tmp, acks, actors, procs)
        os.kill(procs[0].pid, signal.SIGSTOP)
        rng = np.random.default_rng(1)
        rss_before, rss_peak = 0, 0
        for version in range(1, versions + 2):  # version 1 settles allocations before the baseline
            weights = rng.standard_normal(nbytes // 4, dtype=np.float32)
            sockets.send_frames(pub, WeightBlob.build("bench", version, version, {"w": weights}).to_frames())
            del weights
            seen: set[int] = set()
            deadline = time.monotonic() + 10.0
            while (
                len(seen) < actors - 1 and time.monotonic() < deadline
            ):  # the running ones ack; the stopped one cannot
                if acks.poll(100):
                    msg = acks.recv_json()
                    if msg.get("version") == version:
                        seen.add(msg["index"])
            rss = me.memory_info().rss
            if version == 1:
                rss_before = rss
            rss_peak = max(rss_peak, rss)
        growth = (rss_peak - rss_before) / nbytes
        return {
            "blob_bytes": nbytes,
            "actors": actors,
            "stopped": 1,
            "versions": versions,
            "rss_before_mb": round(rss_before / 2**20, 1),
            "rss_peak_mb": round(rss_peak / 2**20, 1),
            "growth_blobs": round(growth, 2),
            "target": {"growth_blobs_max": STALLED_RSS_MAX_BLOBS},
            "met": growth <= STALLED_RSS_MAX_BLOBS,
        }
    finally:
        end_all(procs)
        ctx.destroy(linger=0)
        shutil.rmtree(tmp, ignore_errors=True)


@click.command("broadcast")
@json_option
@quick_option("100 KiB and 10 MiB to 1 and 4 actors, 3 versions")
@click.option("--versions", default=7, show_default=True, help="Timed versions per (path, size, actors).")
def broadcast_cmd(as_json: bool, quick: bool, versions: int) -> None:
    """Median ms from publish until every actor has the new version; target: Tandem <= 1.5x raw at 10 MiB x 16."""
    sizes = ["100KiB", "10MiB"] if quick else ["100KiB", "10MiB", "100MiB"]
    counts = [1, 4] if quick else [1, 4, 16]
    versions = 3 if quick else versions
    say, results = progress(as_json), []
    for size in sizes:
        for actors in counts:
            if size == "100MiB" and actors == 16:
                continue  # cut: 16 x 100 MiB copies plus the publisher's does not fit beside other work on 2 cores
            row = {"size": size, "bytes": SIZES[size], "actors": actors}
            for path in ("raw", "tandem"):
                runs, resends = run_path(path, SIZES[size], actors, versions)
                row[f"{path}_resends"] = resends
                row[f"{path}_median_ms"] = round(statistics.median(runs) * 1e3, 3)
            row["ratio"] = round(row["tandem_median_ms"] / row["raw_median_ms"], 3)
            results.append(row)
            say(
                f"{size:>7s} x {actors:2d}: raw {row['raw_median_ms']:9.2f} ms  tandem "
                f"{row['tandem_median_ms']:9.2f} ms  ratio {row['ratio']:.2f}"
            )
    target_row = next((r for r in results if r["size"] == "10MiB" and r["actors"] == max(counts)), None)
    met = None if target_row is None else target_row["ratio"] <= TARGET_RATIO
    record = {
        "benchmark": "broadcast",
        "quick": quick,
        "versions_per_run": versions,
        "machine": {"cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0))},
        "cut": ["100MiB x 16 actors"] if not quick else [],
        "results": results,
        "target": {"ratio_10MiB_max_actors_max": TARGET_RATIO, "actors": max(counts)},
        "met": met,
        "stalled_subscriber": stalled_subscriber_rss(SIZES["10MiB"], 3, 10 if quick else 50),
    }
    st = record["stalled_subscriber"]
    stalled = (
        f"publisher RSS with 1 of {st['actors']} subscribers SIGSTOPped over {st['versions']} versions of 10 MiB: "
        f"{st['rss_before_mb']} -> {st['rss_peak_mb']} MB peak, {st['growth_blobs']:.2f} blobs "
        f"(target <= {STALLED_RSS_MAX_BLOBS:g}): {'met' if st['met'] else 'NOT met'}"
    )
    target = f"target: 10MiB x {max(counts)} ratio <= {TARGET_RATIO:g}: {'met' if met else 'NOT met'}"
    finish(record, as_json, [target, stalled])
