"""`tandem bench transport`: actor -> learner batches/s over ipc and tcp, Tandem against raw pyzmq and mp.Queue."""

from __future__ import annotations

import multiprocessing as mp
import queue
import shutil
import tempfile
import time
from collections.abc import Iterator

import click
import msgpack
import zmq

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, progress
from tandem.client.bench.shm_path import shm_send_loop, shm_session
from tandem.client.bench.transport_figures import TARGETS, machine, met_flags, ratios, summary
from tandem.client.bench.transport_payloads import (
    BACKLOG_BATCHES,
    CAPACITIES,
    GAMMA,
    JOIN,
    N_STEP,
    PAYLOADS,
    ActorUnrolls,
    as_dict,
    filled_replay,
    make_batch,
    same_message,
    stack_of,
)
from tandem.protocol import sockets, stacks
from tandem.protocol.transitions import TransitionBatch

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
    ("shm-same", "shm"),
    ("mp.Queue", "mp.Queue"),
)
STACKED_ONLY = ("tandem-checked",)  # paths that differ from "tandem" only for frame-stacked payloads
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
    "shm-same": "raw-same's messages through a ring of shared-memory slots: the sender writes each into a free "
    "slot, the receiver copies it out and gives the slot back; only slot numbers cross ZeroMQ (ipc)",
    "mp.Queue": "the unroll's arrays as the env made them, pickled, one unroll a message",
}
WAIT_MS = 100  # every send and receive waits at most this long before looking at the clock or the stop flag
START_TIMEOUT_S = 60.0  # a child that has not started (imports, buffer prefill) within this is a failure


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
            elif path == "shm-same":
                endpoint, recv_one, close = shm_session(ctx, where, *same_message(payload))
            else:
                endpoint, recv_one, close = queue_session(q)
            try:
                conn.send({"endpoint": endpoint})
                conn.send(count_batches(recv_one, warmup_s, duration_s))
            finally:
                close()  # the shared-memory path's ring is unlinked whatever happened
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
        elif path == "shm-same":
            shm_send_loop(ctx, where, same_message(payload)[0], stop)
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
            # shm: the slots' numbers go over ipc
            address = {"ipc": f"ipc://{tmp}/{i}", "shm": f"ipc://{tmp}/{i}", "tcp": "tcp://127.0.0.1:*"}
            conn.send(address.get(transport, transport))
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
        "shm-same",
    ):
        if path in STACKED_ONLY and stack_of(payload) == 1:
            continue
        kinds = {"tandem": ["ipc", "tcp"], "raw-pyzmq": ["ipc", "tcp"], "raw-same": ["ipc", "tcp"], "shm-same": ["shm"]}
        transports = kinds.get(path, ["ipc"]) * repeats
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


@click.command("transport")
@json_option
@quick_option("1 repeat of 0.5 s each")
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
    raw-same moves exactly tandem's messages, encoded beforehand, and does nothing with them; shm-same moves the
    same messages through a ring of shared-memory slots, only their numbers over ZeroMQ. tandem-sender and
    tandem-receiver run one half of tandem's path against a bare socket, to show which half bounds it.
    """
    repeats, warmup_s, duration_s = (1, 0.2, 0.5) if quick else (max(1, repeats), 0.5, 2.0)
    say, results = progress(as_json), []
    for payload in PAYLOADS:
        measured = measure_payload(payload, repeats, warmup_s, duration_s)
        results += measured
        for r in measured:
            say(
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
    finish(record, as_json, summary_lines(rat, met))


def summary_lines(rat: dict, met: dict) -> Iterator[str]:
    """What each path sends, then each ratio, with its target's verdict where it has one."""
    for path, what in SENDS.items():
        yield f"{path}: {what}"
    for key, value in rat.items():
        flag = f"  ({'met' if met[key] else 'NOT met'})" if key in met else ""
        yield f"{key:36s} {value:7.2f}x{flag}"
