"""The payloads `tandem bench transport` sends: Atari-like and CartPole-like unrolls, their wire forms, the
messages an actor's backlog would make of them, and a replay filled as a learner's would be."""

from __future__ import annotations

import dataclasses

import numpy as np

from tandem.daemons.settings.schema import ActorsSection
from tandem.protocol import stacks
from tandem.protocol.transitions import TransitionBatch

# name -> (T, K, obs shape, obs dtype): 256 small transitions, or 32 of stacked 84x84 frames (~1 MB a batch whole)
PAYLOADS = {"cartpole": (32, 8, (4,), np.float32), "atari": (8, 4, (4, 84, 84), np.uint8)}
# Tandem's sender is an actor's backlog: what waits is joined, up to actors.join_unrolls unrolls (and 1 MiB) a message
# ("tandem"), or sent one unroll a message ("tandem-single"). Batches/s counts unrolls either way.
JOIN = {
    "tandem": ActorsSection().join_unrolls,
    "tandem-single": 1,
    "tandem-checked": ActorsSection().join_unrolls,
    "tandem-sender": ActorsSection().join_unrolls,
}
BACKLOG_BATCHES = 16
CAPACITY = 100_000
# Atari-like transitions hold two 28 KiB observations: 20k of them is 1.1 GiB already (100k would be 5.6).
CAPACITIES = {"cartpole": CAPACITY, "atari": 20_000}
N_STEP, GAMMA = 3, 0.99


def make_batch(payload: str, seq: int = 0, steps_envs: tuple[int, int] | None = None) -> TransitionBatch:
    """A deterministic unroll with a few terminated and truncated steps (so final_obs is not empty), of the
    payload's T steps of K envs or of `steps_envs`.

    Atari-like observations are stacks of 4 random frames as FrameStackObservation makes them (each the one
    before shifted by a frame, an episode's first one its frame repeated), so an actor cuts them to frames."""
    steps, envs, obs_shape, dtype = PAYLOADS[payload]
    steps, envs = steps_envs or (steps, envs)
    rng = np.random.default_rng(0)
    terminated = np.zeros((steps, envs), bool)
    truncated = np.zeros((steps, envs), bool)
    terminated[steps // 2, 0] = True
    truncated[steps - 1, envs - 1] = True
    if dtype == np.uint8:
        obs, final_obs = frame_stacks(rng, terminated, truncated, obs_shape)
    else:
        obs = rng.standard_normal((steps + 1, envs, *obs_shape), dtype=np.float32)
        obs[-1] = obs[0]  # copies of this unroll with rising seq follow one another, as an actor's do
        final_obs = obs[:1, 0].copy()
    return TransitionBatch(
        policy_id="bench",
        actor_id="actor-0",
        incarnation=0,
        seq=seq,
        policy_version=0,
        env_steps=seq * steps * envs,
        obs=obs,
        actions=rng.integers(0, 2, (steps, envs), dtype=np.int64),
        rewards=np.ones((steps, envs), np.float32),
        terminated=terminated,
        truncated=truncated,
        final_obs=final_obs,
        extras={},
    )


def frame_stacks(rng, terminated, truncated, obs_shape) -> tuple[np.ndarray, np.ndarray]:
    """(obs, final_obs) of random uint8 frames stacked by FrameStackObservation's rule, with obs[T] == obs[0]."""
    (steps, envs), stack, frame = terminated.shape, obs_shape[0], obs_shape[1:]
    frames = rng.integers(0, 256, (steps + 1, envs, *frame), dtype=np.uint8)
    history = rng.integers(0, 256, (envs, stack - 1, *frame), dtype=np.uint8)
    for k in range(envs):
        if truncated[steps - 1, k] or terminated[steps - 1, k]:  # obs[T] starts an episode: so must obs[0]
            history[k], frames[steps, k] = frames[0, k], frames[0, k]
        else:  # obs[T]'s stack is obs[0]'s (no episode starts in its last frames here)
            frames[steps + 1 - stack :, k] = np.concatenate([history[k], frames[:1, k]])
    final_frames = rng.integers(0, 256, (int(truncated.sum()), *frame), dtype=np.uint8)
    obs, final = stacks.rebuild(frames, history, terminated | truncated, final_frames, truncated)
    return np.ascontiguousarray(obs), np.ascontiguousarray(final)


def payload_bytes(batch: TransitionBatch) -> int:
    return sum(getattr(batch, n).nbytes for n in ("obs", "actions", "rewards", "terminated", "truncated", "final_obs"))


def as_dict(batch: TransitionBatch, seq: int) -> dict:
    """What a pickling queue would carry: the header fields and the same numpy arrays."""
    fields = (
        "policy_id",
        "actor_id",
        "incarnation",
        "policy_version",
        "env_steps",
        "obs",
        "actions",
        "rewards",
        "terminated",
        "truncated",
        "final_obs",
    )
    return {"seq": seq, **{n: getattr(batch, n) for n in fields}}


def stack_of(payload: str) -> int:
    """Frames per observation an actor cuts this payload's stacks into (1: sent whole)."""
    _, _, obs_shape, dtype = PAYLOADS[payload]
    return obs_shape[0] if dtype == np.uint8 else 1


def wire_form(batch: TransitionBatch, stack: int) -> TransitionBatch:
    """What an actor's link pushes into its backlog (PolicyLink.wire_form): frame stacks cut to frames."""
    packed = stacks.pack(batch, stack) if stack > 1 else None
    return batch if packed is None else packed


class ActorUnrolls:
    """Unrolls of `batch` one after another as an actor's stepping records them: step by step, frame stacks kept
    as their frames (FrameUnrollBuilder; `checked`: each stack checked against the one before), each unroll
    starting on the observation the one before ended on (so its frames share the stream's FrameRows, as an
    actor's do); unstacked batches as they are."""

    def __init__(self, batch: TransitionBatch, stack: int, checked: bool = False):
        from tandem.daemons.acting.unroll import FrameRows

        self.batch, self.stack, self.checked = batch, stack, checked
        self.rows, self.last = FrameRows(), batch.obs[0]  # make_batch's obs[T] equals its obs[0]

    def next(self, seq: int) -> TransitionBatch:
        batch = self.batch
        if self.stack < 2:
            return dataclasses.replace(batch, seq=seq)
        from tandem.daemons.acting.unroll import FrameUnrollBuilder
        from tandem.daemons.envs.gym_envs import StepResult

        u = FrameUnrollBuilder(
            batch.num_steps, self.last, batch.actions.shape[2:], batch.actions.dtype, self.checked, self.rows
        )
        first = 0
        for t in range(batch.num_steps):
            ends = int(np.count_nonzero(batch.truncated[t]))
            self.last = batch.obs[t + 1]
            u.add(
                batch.actions[t],
                StepResult(
                    self.last,
                    batch.rewards[t],
                    batch.terminated[t],
                    batch.truncated[t],
                    batch.final_obs[first : first + ends],
                    [],
                ),
            )
            first += ends
        return dataclasses.replace(batch, seq=seq, actions=u.actions, **u.batch_arrays())


def same_message(payload: str) -> tuple[list, int]:
    """The first message Tandem's sender makes from a full backlog, as bytes, and how many unrolls it holds."""
    from tandem.daemons.acting.backlog import JoiningBacklog

    batch, stack = make_batch(payload), stack_of(payload)
    backlog = JoiningBacklog(BACKLOG_BATCHES, JOIN["tandem"])
    for seq in range(BACKLOG_BATCHES):
        backlog.push(wire_form(dataclasses.replace(batch, seq=seq), stack))
    sent: list = []

    def take_first(frames) -> bool:
        if sent:
            return False  # refused: the flush stops after the first message
        sent.append([bytes(f) for f in frames])
        return True

    backlog.flush(take_first)
    return sent[0], TransitionBatch.from_frames(sent[0]).num_steps // batch.num_steps


def filled_replay(payload: str):
    """A full buffer, so that inserts cost what they do in steady state (no first-touch page faults)."""
    from tandem.daemons.replay import FrameReplay, NStepTransitions, ReplayBuffer

    _, _, obs_shape, dtype = PAYLOADS[payload]
    capacity = CAPACITIES[payload]
    if stack_of(payload) > 1:  # as the learner's ReplayFeed stores frame stacks: each frame once
        replay = FrameReplay(capacity, obs_shape, dtype, (), np.int64, N_STEP, GAMMA)
        packed, seq = wire_form(make_batch(payload), stack_of(payload)), 0
        while replay.written < 1.1 * replay.frame_capacity:  # until the frame ring has wrapped
            replay.add(dataclasses.replace(packed, actor_id="prefill", seq=seq))
            seq += 1
        return replay
    buf = ReplayBuffer(capacity, obs_shape, dtype, (), np.int64)
    chunk = 5_000
    zeros = NStepTransitions(
        obs=np.zeros((chunk, *obs_shape), dtype),
        actions=np.zeros(chunk, np.int64),
        returns=np.zeros(chunk, np.float32),
        next_obs=np.zeros((chunk, *obs_shape), dtype),
        discounts=np.zeros(chunk, np.float32),
        versions=np.zeros(chunk, np.int64),
    )
    for _ in range(capacity // chunk):
        buf.add(zeros)
    return buf


# ------------------------------------------------------------------------------------------- receivers
