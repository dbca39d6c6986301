"""`tandem bench transport`: actor -> learner batches/s over ipc and tcp, Tandem against raw pyzmq and mp.Queue."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import platform
import queue
import shutil
import statistics
import tempfile
import time

import click
import msgpack
import numpy as np
import zmq

from tandem.daemons.settings.schema import ActorsSection
from tandem.protocol import sockets, stacks
from tandem.protocol.transitions import TransitionBatch

# name -> (T, K, obs shape, obs dtype): 256 small transitions, or 32 of stacked 84x84 frames (~1 MB a batch whole)
PAYLOADS = {"cartpole": (32, 8, (4,), np.float32), "atari": (8, 4, (4, 84, 84), np.uint8)}
PATHS = (
    ("tandem", "ipc"),
    ("tandem", "tcp"),
    ("tandem-single", "ipc"),
    ("tandem-checked", "ipc"),
    ("tandem-sender", "ipc"),
    ("tandem-receiver", "ipc"),
    ("raw-pyzmq", "ipc"),
    ("raw-pyzmq", "tcp"),
    ("raw-same", "ipc"),
    ("raw-same", "tcp"),
    ("mp.Queue", "mp.Queue"),
)
STACKED_ONLY = ("tandem-checked",)  # paths that differ from "tandem" only for frame-stacked payloads
# Tandem's sender is an actor's backlog: what waits is joined, up to actors.join_unrolls unrolls (and 1 MiB) a message
# ("tandem"), or sent one unroll a message ("tandem-single"). Batches/s counts unrolls either way.
JOIN = {
    "tandem": ActorsSection().join_unrolls,
    "tandem-single": 1,
    "tandem-checked": ActorsSection().join_unrolls,
    "tandem-sender": ActorsSection().join_unrolls,
}
# Which processes do Tandem's work on each path: each half alone (the other a bare pyzmq socket) shows which bounds.
TANDEM_SENDS = ("tandem", "tandem-single", "tandem-checked", "tandem-sender")
TANDEM_RECEIVES = ("tandem", "tandem-single", "tandem-checked", "tandem-receiver")
# What each path moves per unroll: the same information, in the form each sends it.
SENDS = {
    "tandem": "an actor's path: frame stacks kept as their frames step by step (Atari; env.atari's stacks follow "
    "the rule by construction, so unchecked), unrolls joined as the backlog joins them, encoded; "
    "the receiver decodes, checks, runs n-step windows and inserts into replay",
    "tandem-single": "as tandem, one unroll a message",
    "tandem-checked": "as tandem, the sender checking every stack against the one before (an actor whose envs "
    "are not bare FrameStackObservations: env.vector, a user's own wrappers)",
    "tandem-sender": "tandem's sender alone: its messages are received and dropped (counted by their header's T)",
    "tandem-receiver": "tandem's receiver alone: it gets raw-same's ready-made messages",
    "raw-pyzmq": "the unroll's arrays as the env made them (whole frame stacks), one unroll a message, "
    "received and dropped",
    "raw-same": "exactly the messages tandem's sender makes (frames once, joined), encoded once beforehand, "
    "received and dropped",
    "mp.Queue": "the unroll's arrays as the env made them, pickled, one unroll a message",
}
BACKLOG_BATCHES = 16
CAPACITY = 100_000
# Atari-like transitions hold two 28 KiB observations: 20k of them is 1.1 GiB already (100k would be 5.6).
CAPACITIES = {"cartpole": CAPACITY, "atari": 20_000}
N_STEP, GAMMA = 3, 0.99
TARGETS = {"atari_tandem_over_raw_min": 0.8, "cartpole_tandem_over_raw_min": 0.6, "atari_tandem_over_mp_queue_min": 5.0}
WAIT_MS = 100  # every send and receive waits at most this long before looking at the clock or the stop flag
START_TIMEOUT_S = 60.0  # a child that has not started (imports, buffer prefill) within this is a failure


def make_batch(payload: str, seq: int = 0) -> TransitionBatch:
    """A deterministic unroll with a few terminated and truncated steps (so final_obs is not empty).

    Atari-like observations are stacks of 4 random frames as FrameStackObservation makes them (each the one
    before shifted by a frame, an episode's first one its frame repeated), so an actor cuts them to frames."""
    steps, envs, obs_shape, dtype = PAYLOADS[payload]
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


def tandem_session(ctx: zmq.Context, endpoint: str, replay, payload: str):
    # Imported here: tandem.daemons.replay imports torch, which only the Tandem receiver should pay for.
    from tandem.daemons.replay import FrameReplay, NStepAccumulator

    sock, nstep = sockets.transitions_pull(ctx, endpoint), NStepAccumulator(N_STEP, GAMMA)
    # As the learner's ReplayFeed: a frame replay runs its own n-step windows over frame numbers.
    insert = (
        replay.add if isinstance(replay, FrameReplay) else (lambda batch: replay.add(nstep.add(stacks.unpack(batch))))
    )

    steps = PAYLOADS[payload][0]

    def recv_one() -> int:
        """Unrolls received (a joined message holds several)."""
        frames = sockets.recv_frames(sock, WAIT_MS)
        if frames is None:
            return 0
        batch = TransitionBatch.from_frames(frames)
        insert(batch)
        return batch.num_steps // steps

    return sockets.bound_endpoint(sock), recv_one, sock.close


def raw_session(ctx: zmq.Context, endpoint: str, unrolls: int = 1, unrolls_in: int = 0):
    """Receives and drops messages of `unrolls` unrolls each, or, with `unrolls_in` (an unroll's T), of as many
    as the header's `actions` shape says (a joining sender's messages need not all hold the same number)."""
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(endpoint)

    def recv_one() -> int:
        if not sock.poll(WAIT_MS, zmq.POLLIN):
            return 0
        frames = sock.recv_multipart(copy=False)
        if not unrolls_in:
            return unrolls
        header = msgpack.unpackb(frames[0].buffer)
        steps = next(a["shape"][0] for a in header["arrays"] if a["name"] == "actions")
        return steps // unrolls_in

    return sock.getsockopt_string(zmq.LAST_ENDPOINT), recv_one, sock.close


def queue_session(q):
    def recv_one() -> bool:
        try:
            q.get(timeout=WAIT_MS / 1000)
        except queue.Empty:
            return False
        return True

    return None, recv_one, lambda: None


def run_receiver(path: str, payload: str, warmup_s: float, duration_s: float, conn, q) -> None:
    """Child: for each address the parent sends (None ends it), open it, tell the parent, warm up, count batches.

    One receiver serves every session of its (path, payload), so the Tandem one fills its replay buffer once.
    """
    ctx = zmq.Context()
    try:
        replay = filled_replay(payload) if path in TANDEM_RECEIVES else None
        while conn.poll(START_TIMEOUT_S):
            where = conn.recv()
            if where is None:
                break
            if path in TANDEM_RECEIVES:
                endpoint, recv_one, close = tandem_session(ctx, where, replay, payload)
            elif path == "raw-pyzmq":
                endpoint, recv_one, close = raw_session(ctx, where)
            elif path == "tandem-sender":
                endpoint, recv_one, close = raw_session(ctx, where, unrolls_in=PAYLOADS[payload][0])
            elif path in ("raw-same", "tandem-receiver"):
                endpoint, recv_one, close = raw_session(ctx, where, same_message(payload)[1])
            else:
                endpoint, recv_one, close = queue_session(q)
            conn.send({"endpoint": endpoint})
            conn.send(count_batches(recv_one, warmup_s, duration_s))
            close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the measurement
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        ctx.destroy(linger=0)


def count_batches(recv_one, warmup_s: float, duration_s: float) -> dict:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not recv_one():
        if time.monotonic() > deadline:
            return {"error": "no batch arrived"}
    end_warmup = time.monotonic() + warmup_s
    while time.monotonic() < end_warmup:
        recv_one()
    count, start = 0, time.monotonic()  # unrolls
    now = start
    while now - start < duration_s:
        count += int(recv_one())
        now = time.monotonic()
    return {"batches": count, "elapsed_s": now - start}


# --------------------------------------------------------------------------------------------- senders


def run_sender(path: str, where, payload: str, stop) -> None:
    """Child: send batches as fast as the receiver takes them until `stop` is set."""
    batch = make_batch(payload)
    if path == "mp.Queue":
        where.cancel_join_thread()  # never wait at exit to flush a queue nobody reads any more
        seq = 0
        while not stop.is_set():
            try:
                where.put(as_dict(batch, seq), timeout=WAIT_MS / 1000)
                seq += 1
            except queue.Full:
                pass
        return
    ctx = zmq.Context()
    try:
        if path in TANDEM_SENDS:
            tandem_send_loop(ctx, where, batch, stop, JOIN[path], stack_of(payload), path == "tandem-checked")
        elif path in ("raw-same", "tandem-receiver"):
            raw_send_loop(ctx, where, same_message(payload)[0], stop)
        else:
            raw_send_loop(ctx, where, batch.to_frames(), stop)
    finally:
        ctx.destroy(linger=0)


def tandem_send_loop(
    ctx: zmq.Context,
    endpoint: str,
    batch: TransitionBatch,
    stop,
    max_join: int = 1,
    stack: int = 1,
    checked: bool = False,
) -> None:
    """An actor faster than its learner: its backlog is kept full and flushed as the actor's link does (with
    `stack` > 1 each unroll is recorded step by step as the actor's stepping records it: frames kept)."""
    from tandem.daemons.acting.backlog import JoiningBacklog

    sock = sockets.transitions_push(ctx, endpoint)
    backlog = JoiningBacklog(BACKLOG_BATCHES, max_join)
    unrolls, seq = ActorUnrolls(batch, stack, checked), 0
    while not stop.is_set():
        while len(backlog) < backlog.max_batches:  # a new unroll each time: seq goes up, windows continue
            backlog.push(unrolls.next(seq))
            seq += 1
        if not backlog.flush(lambda frames: bool(sockets.send_frames(sock, frames)), lambda: sockets.writable(sock)):
            sock.poll(WAIT_MS, zmq.POLLOUT)


def raw_send_loop(ctx: zmq.Context, endpoint: str, frames: list, stop) -> None:
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    while not stop.is_set():
        if sock.poll(WAIT_MS, zmq.POLLOUT):
            sock.send_multipart(frames, copy=False)


# ---------------------------------------------------------------------------------------------- parent


def wait_message(conn, timeout_s: float) -> dict:
    if not conn.poll(timeout_s):
        return {"error": f"no answer from the receiver within {timeout_s:.0f} s"}
    return conn.recv()


def end_process(proc) -> None:
    proc.join(5.0)
    if proc.is_alive():
        proc.terminate()
        proc.join(2.0)
    if proc.is_alive():
        proc.kill()
        proc.join(2.0)


def session(ctx, conn, path: str, payload: str, q, budget_s: float) -> float:
    """Batches/s of one session: the receiver has been sent its address; a fresh sender feeds it."""
    ready = wait_message(conn, START_TIMEOUT_S)
    if "error" in ready:
        raise RuntimeError(f"{path}/{payload}: {ready['error']}")
    stop = ctx.Event()
    target = q if path == "mp.Queue" else ready["endpoint"]
    sender = ctx.Process(target=run_sender, args=(path, target, payload, stop), daemon=True)
    sender.start()
    try:
        result = wait_message(conn, START_TIMEOUT_S + budget_s)
    finally:
        stop.set()
        end_process(sender)
    if "error" in result:
        raise RuntimeError(f"{path}/{payload}: {result['error']}")
    return result["batches"] / result["elapsed_s"]


def measure_group(path: str, payload: str, transports: list[str], warmup_s: float, duration_s: float) -> list[float]:
    """Batches/s of each session in `transports`, all received by one process, each sent by a fresh one."""
    ctx = mp.get_context("spawn")
    tmp = tempfile.mkdtemp(prefix="tb-", dir="/tmp")  # short: ipc paths are limited to ~100 characters
    q = ctx.Queue(maxsize=64) if path == "mp.Queue" else None
    conn, child_conn = ctx.Pipe()
    receiver = ctx.Process(target=run_receiver, args=(path, payload, warmup_s, duration_s, child_conn, q), daemon=True)
    receiver.start()
    try:
        rates = []
        for i, transport in enumerate(transports):
            conn.send({"ipc": f"ipc://{tmp}/{i}", "tcp": "tcp://127.0.0.1:*"}.get(transport, transport))
            rates.append(session(ctx, conn, path, payload, q, warmup_s + duration_s + 10))
        conn.send(None)
        return rates
    finally:
        end_process(receiver)
        shutil.rmtree(tmp, ignore_errors=True)


def measure_payload(payload: str, repeats: int, warmup_s: float, duration_s: float) -> list[dict]:
    """Every (path, transport) for one payload; ipc and tcp sessions alternate, mp.Queue gets a fresh queue each."""
    runs: dict[tuple[str, str], list[float]] = {}
    for path in (
        "tandem",
        "tandem-single",
        "tandem-checked",
        "tandem-sender",
        "tandem-receiver",
        "raw-pyzmq",
        "raw-same",
    ):
        if path in STACKED_ONLY and stack_of(payload) == 1:
            continue
        transports = (["ipc", "tcp"] if path in ("tandem", "raw-pyzmq", "raw-same") else ["ipc"]) * repeats
        for transport, rate in zip(transports, measure_group(path, payload, transports, warmup_s, duration_s)):
            runs.setdefault((path, transport), []).append(rate)
    # A killed queue writer can leave a half-written message behind: never reuse a queue across senders.
    runs[("mp.Queue", "mp.Queue")] = [
        measure_group("mp.Queue", payload, ["mp.Queue"], warmup_s, duration_s)[0] for _ in range(repeats)
    ]
    return [
        summary(path, transport, payload, runs[(path, transport)])
        for path, transport in PATHS
        if (path, transport) in runs
    ]


def summary(path: str, transport: str, payload: str, runs: list[float]) -> dict:
    batch = make_batch(payload)
    rate = statistics.median(runs)
    if path in ("tandem", "tandem-checked", "raw-same", "tandem-sender", "tandem-receiver"):
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


@click.command("transport")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="1 repeat of 0.5 s each (a smoke run, not a figure to quote).")
@click.option(
    "--repeats", default=3, show_default=True, help="Timed runs per (path, transport, payload); medians reported."
)
def transport_cmd(as_json: bool, quick: bool, repeats: int) -> None:
    """Actor -> learner batches/s across processes: Tandem (decode + n-step + replay insert) vs raw pyzmq, mp.Queue.

    Tandem's sender records Atari-like unrolls step by step keeping each stack's newest frame, and joins the
    unrolls waiting in its backlog (up to actors.join_unrolls, 16, a message, and at most 1 MiB of observations)
    as an actor does; `tandem-single` sends one unroll a message; `tandem-checked` also checks every stack
    against the one before, as an actor must where its envs are not bare FrameStackObservations. raw-pyzmq and
    mp.Queue move one unroll a message with its arrays as the env made them;
    raw-same moves exactly tandem's messages, encoded beforehand, and does nothing with them. tandem-sender and
    tandem-receiver run one half of tandem's path against a bare socket, to show which half bounds it.
    """
    repeats, warmup_s, duration_s = (1, 0.2, 0.5) if quick else (max(1, repeats), 0.5, 2.0)
    results = []
    for payload in PAYLOADS:
        measured = measure_payload(payload, repeats, warmup_s, duration_s)
        results += measured
        if not as_json:
            for r in measured:
                click.echo(
                    f"{payload:9s} {r['path']:13s} {r['transport']:9s} {r['batches_per_s']:10.1f} batches/s "
                    f"{r['transitions_per_s']:>11,d} transitions/s {r['mb_per_s']:8.1f} MB/s as made "
                    f"{r['wire_mb_per_s']:8.1f} MB/s on the wire"
                )
    rat = ratios(results)
    met = met_flags(rat)
    record = {
        "benchmark": "transport",
        "quick": quick,
        "machine": machine(),
        "repeats": repeats,
        "duration_s": duration_s,
        "replay_capacity": CAPACITIES,
        "n_step": N_STEP,
        "sends": SENDS,
        "results": results,
        "ratios": rat,
        "targets": TARGETS,
        "met": met,
    }
    if as_json:
        click.echo(json.dumps(record))
        return
    for path, what in SENDS.items():
        click.echo(f"{path}: {what}")
    for key, value in rat.items():
        flag = f"  ({'met' if met[key] else 'NOT met'})" if key in met else ""
        click.echo(f"{key:36s} {value:7.2f}x{flag}")
