"""`tandem bench transport`'s figures: a path's summary over its runs, the ratios its targets are judged by, and
the machine they were measured on."""

from __future__ import annotations

import os
import platform
import statistics

import numpy as np
import zmq

from tandem.client.bench.transport_payloads import (
    PAYLOADS,
    make_batch,
    payload_bytes,
    same_message,
    stack_of,
    wire_form,
)

TARGETS = {"atari_tandem_over_raw_min": 0.8, "cartpole_tandem_over_raw_min": 0.6, "atari_tandem_over_mp_queue_min": 5.0}


def summary(path: str, transport: str, payload: str, runs: list[float]) -> dict:
    batch = make_batch(payload)
    rate = statistics.median(runs)
    if path in ("tandem", "tandem-checked", "raw-same", "shm-same", "tandem-sender", "tandem-receiver"):
        message, unrolls = same_message(payload)
        wire = sum(len(f) for f in message) / unrolls
    elif path == "tandem-single":
        wire = sum(memoryview(f).nbytes for f in wire_form(batch, stack_of(payload)).to_frames())
    else:
        wire = payload_bytes(batch)
    return {
        "path": path,
        "transport": transport,
        "payload": payload,
        "batches_per_s": round(rate, 1),
        "transitions_per_s": round(rate * batch.num_transitions),
        "mb_per_s": round(rate * payload_bytes(batch) / 1e6, 1),  # the unrolls' arrays as the env made them
        "wire_bytes_per_unroll": round(wire),
        "wire_mb_per_s": round(rate * wire / 1e6, 1),
        "runs_batches_per_s": [round(r, 1) for r in runs],
    }


def ratios(results: list[dict]) -> dict[str, float]:
    rate = {(r["path"], r["transport"], r["payload"]): r["batches_per_s"] for r in results}
    out = {}
    for payload in PAYLOADS:
        for transport in ("ipc", "tcp"):
            tandem = rate[("tandem", transport, payload)]
            out[f"{payload}/{transport}/tandem_over_raw"] = round(
                tandem / max(rate[("raw-pyzmq", transport, payload)], 1e-9), 3
            )
            out[f"{payload}/{transport}/tandem_over_raw_same"] = round(
                tandem / max(rate[("raw-same", transport, payload)], 1e-9), 3
            )
            if transport == "ipc":
                # the same bytes through shared memory against ZeroMQ ipc: above 1, shared memory moves them faster
                out[f"{payload}/shm_same_over_raw_same_ipc"] = round(
                    rate[("shm-same", "shm", payload)] / max(rate[("raw-same", "ipc", payload)], 1e-9), 3
                )
                raw = max(rate[("raw-pyzmq", "ipc", payload)], 1e-9)
                out[f"{payload}/ipc/tandem_single_over_raw"] = round(rate[("tandem-single", "ipc", payload)] / raw, 3)
                out[f"{payload}/ipc/sender_alone_over_raw"] = round(rate[("tandem-sender", "ipc", payload)] / raw, 3)
                out[f"{payload}/ipc/receiver_alone_over_raw"] = round(
                    rate[("tandem-receiver", "ipc", payload)] / raw, 3
                )
                if ("tandem-checked", "ipc", payload) in rate:
                    out[f"{payload}/ipc/tandem_checked_over_raw"] = round(
                        rate[("tandem-checked", "ipc", payload)] / raw, 3
                    )
            queue_rate = rate[("mp.Queue", "mp.Queue", payload)]
            out[f"{payload}/{transport}/tandem_over_mp_queue"] = round(tandem / max(queue_rate, 1e-9), 3)
    return out


def met_flags(rat: dict[str, float]) -> dict[str, bool]:
    met = {}
    for transport in ("ipc", "tcp"):
        for payload in PAYLOADS:
            key = f"{payload}/{transport}/tandem_over_raw"
            met[key] = rat[key] >= TARGETS[f"{payload}_tandem_over_raw_min"]
        key = f"atari/{transport}/tandem_over_mp_queue"
        met[key] = rat[key] >= TARGETS["atari_tandem_over_mp_queue_min"]
    return met


def machine() -> dict:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
    }
