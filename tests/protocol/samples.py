"""Builders of valid messages for protocol tests (pure data, no sockets)."""

from __future__ import annotations

import numpy as np

from tandem.protocol import ControlReply, ControlRequest, Heartbeat, TransitionBatch, WeightBlob, WeightRequest
from tandem.protocol.game import GameAction, GameBye, GameError, GameHello, GameSpaces, GameStep, GameWelcome


def batch_of(
    obs,
    actions,
    rewards,
    terminated,
    truncated,
    final_obs,
    extras=None,
    *,
    actor: str = "actor-0",
    incarnation: int = 7,
    seq: int = 0,
    version: int = 3,
    env_steps: int = 1234,
) -> TransitionBatch:
    """A batch of policy "default" with these arrays; the header fields a test does not set have fixed values."""
    header = ("default", actor, incarnation, seq, version, env_steps)
    return TransitionBatch(*header, obs, actions, rewards, terminated, truncated, final_obs, extras or {})


def unroll(
    steps: int = 5,
    envs: int = 3,
    obs_shape=(4,),
    obs_dtype="<f4",
    ends=(),
    seed: int = 0,
    extras: bool = False,
    seq: int = 0,
) -> TransitionBatch:
    """An unroll whose episodes end where `ends` says: a list of (t, k, 'terminated' | 'truncated')."""
    rng = np.random.default_rng(seed)
    obs = (rng.random((steps + 1, envs, *obs_shape)) * 100).astype(obs_dtype)
    terminated = np.zeros((steps, envs), bool)
    truncated = np.zeros((steps, envs), bool)
    for t, k, how in ends:
        (terminated if how == "terminated" else truncated)[t, k] = True
    final_obs = (rng.random((int(truncated.sum()), *obs_shape)) * 100).astype(obs_dtype)
    extra = {"logits": rng.standard_normal((steps, envs, 2)).astype("<f4")} if extras else {}
    actions = rng.integers(0, 2, (steps, envs)).astype("<i8")
    rewards = rng.standard_normal((steps, envs)).astype("<f4")
    return batch_of(obs, actions, rewards, terminated, truncated, final_obs, extra, seq=seq)


def blob(version: int = 1, sizes=((64, 4), (64,), (2, 64), (2,)), seed: int = 0) -> WeightBlob:
    rng = np.random.default_rng(seed)
    tensors = {f"layer{i}": rng.standard_normal(shape).astype("<f4") for i, shape in enumerate(sizes)}
    return WeightBlob.build("default", version, train_step=10 * version, tensors=tensors)


def heartbeat(name: str = "actor-0", role: str = "actor", counters=None, **fields) -> Heartbeat:
    """A first heartbeat of `name` on host "h" in stage "running"; `fields` set any other of its fields."""
    start = {"pid": 1, "host": "h", "incarnation": 1, "seq": 0, "stage": "running", "stage_elapsed_s": 0.0}
    return Heartbeat(role=role, name=name, counters=dict(counters or {}), **{**start, **fields})


def every_kind() -> list:
    return [
        unroll(ends=[(1, 0, "terminated"), (3, 2, "truncated")], extras=True),
        blob(),
        WeightRequest("default", have_version=4, requester="actor-1"),
        heartbeat(
            "actor-1",
            counters={"env_steps": 100, "fps": 1234.5},
            pid=123,
            host="box",
            incarnation=2,
            seq=9,
            stage_elapsed_s=1.5,
            rss_bytes=1 << 20,
            cpu_percent=50.0,
            error="",
        ),
        ControlRequest(request_id=1, command="status", args={"verbose": True, "names": ["a", "b"]}),
        ControlReply(request_id=1, ok=False, code="unknown_command", message="no such command", data={"x": [1, 2.5]}),
        *game_kinds(),
    ]


def game_kinds() -> list:
    spaces = GameSpaces((4,), "<f4", "discrete", 2, (), "<i8")
    return [
        GameHello(1, "pong", 2, spaces),
        GameWelcome(1, [3, 4], spaces, 10.0, "actor-0"),
        GameStep(2, 3, np.arange(4, dtype="<f4"), 0.5, True, False),
        GameAction(2, 3, 7, np.array([1], "<i8")),
        GameError(2, "bad_obs", "obs must be <f4 [4]", False),
        GameBye(5, "quit"),
    ]


def unchecked_frames(batch: TransitionBatch) -> list[bytes]:
    """The frames `batch.to_frames()` would send, without its checks: what a faulty sender puts on the wire."""
    from tandem.protocol import framing
    from tandem.protocol.transitions import wire_message

    return [bytes(f) for f in framing.encode(TransitionBatch.KIND, *wire_message(batch))]
