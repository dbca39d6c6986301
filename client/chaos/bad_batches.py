"""Drill: well-framed but wrong batches every 10 ms from a raw pyzmq PUSH, built with the protocol's encoder."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import zmq

from tandem.client.chaos.judge import Drill
from tandem.client.chaos.run import Run, rows, updates
from tandem.protocol import TransitionBatch, framing
from tandem.protocol.transitions import wire_message

LEARNER = "learner-default"
STEPS, ENVS = 16, 8
INTERVAL_S = 0.010


def good_batch(version: int) -> TransitionBatch:
    rng = np.random.default_rng(0)
    return TransitionBatch(
        policy_id="default",
        actor_id="chaos",
        incarnation=1,
        seq=0,
        policy_version=version,
        env_steps=0,
        obs=rng.normal(size=(STEPS + 1, ENVS, 4)).astype(np.float32),
        actions=rng.integers(0, 2, (STEPS, ENVS)),
        rewards=np.ones((STEPS, ENVS), np.float32),
        terminated=np.zeros((STEPS, ENVS), bool),
        truncated=np.zeros((STEPS, ENVS), bool),
        final_obs=np.zeros((0, 4), np.float32),
    )


def wrong_batches(version: int) -> dict[str, tuple[str, list[bytes]]]:
    """kind -> (the learner's malformed_<reason> it must land in, its frames)."""
    good = good_batch(version)
    nan = good.rewards.copy()
    nan[3, 2] = np.nan
    made = {
        "obs_width": (
            "obs_shape",
            dataclasses.replace(
                good, obs=np.zeros((STEPS + 1, ENVS, 5), np.float32), final_obs=np.zeros((0, 5), np.float32)
            ),
        ),
        "extra_action_axis": ("algorithm", dataclasses.replace(good, actions=np.zeros((STEPS, ENVS, 2), np.int64))),
        "action_out_of_range": ("algorithm", dataclasses.replace(good, actions=np.full((STEPS, ENVS), 7, np.int64))),
        "nan_reward": ("values", dataclasses.replace(good, rewards=nan)),
    }
    out = {kind: (reason, [bytes(f) for f in batch.to_frames()]) for kind, (reason, batch) in made.items()}
    out["garbage_header"] = ("frames", [b"\x01 not a msgpack header", b"\x00" * 64])
    out["entity_rows_short"] = ("entities", entity_rows_short(good))
    return out


def entity_rows_short(good: TransitionBatch) -> list[bytes]:
    """An entity batch (PROTOCOL.md 2.1.7) whose ragged rows are one short of what its counts add up to."""
    counts = np.ones((STEPS + 1, ENVS), np.int32)
    units = np.zeros((STEPS + 1, ENVS, 4, 2), np.float32)
    final = {"unit": np.zeros((0, 4, 2), np.float32), "count:unit": np.zeros(0, np.int32)}
    batch = dataclasses.replace(good, obs={"unit": units, "count:unit": counts}, final_obs=final)
    fields, arrays = wire_message(batch)
    arrays = [(name, arr[1:] if name == "obs.unit" else arr) for name, arr in arrays]
    return [bytes(f) for f in framing.encode(TransitionBatch.KIND, fields, arrays)]


def bad_batches(run: Run, drill: Drill, seconds: float) -> None:
    drill.thresholds = {"learner_restarts": 0, "counted_equals_sent": True, "interval_s": INTERVAL_S}
    data = run.wait(lambda d: updates(d) > 0, 60, "the learner training")
    learner = rows(data)[LEARNER]
    pid, before, first = learner["pid"], dict(learner["counters"]), updates(data)
    endpoint = f"tcp://{run.config.transport.host}:{run.config.transport.transitions_port}"
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 1000)
    sock.connect(endpoint)
    sent: dict[str, int] = {}
    refused = 0
    try:
        kinds = wrong_batches(max(0, learner["version"] or 0))
        reasons = {reason for reason, _ in kinds.values()}
        started = next_at = refreshed = time.monotonic()
        i = 0
        while time.monotonic() - started < seconds:
            if time.monotonic() - refreshed >= 1.0:  # the learner's version now, so no batch is merely stale
                kinds, refreshed = wrong_batches(max(0, run.row(LEARNER)["version"] or 0)), time.monotonic()
            kind = list(kinds)[i % len(kinds)]
            try:
                sock.send_multipart(kinds[kind][1], flags=zmq.NOBLOCK)
                sent[kind] = sent.get(kind, 0) + 1
            except zmq.Again:
                refused += 1
            i += 1
            next_at += INTERVAL_S
            time.sleep(max(0.0, next_at - time.monotonic()))
        total = sum(sent.values())
        # what is still queued or in flight is read within seconds; then the counts must add up
        data = run.wait(
            lambda d: (
                rows(d)[LEARNER]["counters"]["batches_malformed"] - before["batches_malformed"] >= total
                or rows(d)[LEARNER]["pid"] != pid
            ),
            30,
            "the wrong batches counted",
        )
    finally:
        sock.close(0)
        ctx.term()
    after = rows(data)[LEARNER]
    by_reason = {
        r: after["counters"].get(f"malformed_{r}", 0) - before.get(f"malformed_{r}", 0) for r in sorted(reasons)
    }
    expected = {r: sum(n for k, n in sent.items() if kinds[k][0] == r) for r in sorted(reasons)}
    drill.figures = {
        "seconds": seconds,
        "sent": sent,
        "refused_by_hwm": refused,
        "counted_by_reason": by_reason,
        "expected_by_reason": expected,
        "learner_restarts": int(after["pid"] != pid),
        "updates_before": first,
        "updates_after": updates(data),
    }
    drill.check("learner restarts == 0", after["pid"] == pid)
    drill.check("learner updates kept rising", updates(data) > first)
    drill.check("every wrong batch counted under its reason", by_reason == expected)
