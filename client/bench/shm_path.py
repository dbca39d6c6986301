"""`tandem bench transport`'s shared-memory path: Tandem's messages moved through a ring of shared-memory slots,
only a slot's number and lengths over ZeroMQ, to learn whether keeping frames in shared memory (as Sample Factory
and PufferLib do) beats ZeroMQ ipc between an actor and its learner on one host."""

from __future__ import annotations

from multiprocessing import shared_memory

import msgpack
import numpy as np
import zmq

SLOTS = 8  # messages in flight: the sender waits for a slot the receiver has given back
WAIT_MS = 100


def slot_bytes(frames: list) -> int:
    return sum(len(f) for f in frames)


def shm_session(ctx: zmq.Context, endpoint: str, frames: list, unrolls: int):
    """The receiving side: it owns the ring (named in the endpoint it reports: `ADDRESS#NAME`), copies each
    message's frames out of their slot (a learner keeps what it trains on; a slot is reused) and gives it back."""
    size = slot_bytes(frames)
    ring = shared_memory.SharedMemory(create=True, size=SLOTS * size)
    sock = ctx.socket(zmq.PAIR)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, WAIT_MS)  # a peer gone: a send gives up (zmq.Again) instead of waiting for ever
    sock.bind(endpoint)
    view = np.ndarray((SLOTS * size,), np.uint8, ring.buf)

    def recv_one() -> int:
        if not sock.poll(WAIT_MS, zmq.POLLIN):
            return 0
        slot, lengths = msgpack.unpackb(sock.recv())
        start = slot * size
        for length in lengths:  # out of the ring into memory of the receiver's own, frame by frame
            view[start : start + length].copy()
            start += length
        try:
            sock.send(msgpack.packb(slot))
        except zmq.Again:
            pass  # the sender is gone (the session ended): the copy still counts
        return unrolls

    def close() -> None:
        nonlocal view
        sock.close()
        del view  # the ring's buffer may not be exported when it closes
        ring.close()
        ring.unlink()

    return f"{sock.getsockopt_string(zmq.LAST_ENDPOINT)}#{ring.name}", recv_one, close


def shm_send_loop(ctx: zmq.Context, where: str, frames: list, stop) -> None:
    """The sending side: each message's frames copied into a free slot, its number and lengths sent."""
    endpoint, name = where.rsplit("#", 1)
    size, lengths = slot_bytes(frames), [len(f) for f in frames]
    ring = shared_memory.SharedMemory(name=name)
    view = np.ndarray((SLOTS * size,), np.uint8, ring.buf)
    sources = [np.frombuffer(f, np.uint8) for f in frames]
    sock = ctx.socket(zmq.PAIR)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, WAIT_MS)
    sock.connect(endpoint)
    free = list(range(SLOTS))
    try:
        while not stop.is_set():
            while sock.poll(0 if free else WAIT_MS, zmq.POLLIN):
                free.append(msgpack.unpackb(sock.recv()))
            if not free:
                continue
            slot = free.pop()
            start = slot * size
            for source in sources:  # the actor writes its message into the ring (where ZeroMQ copies it to the kernel)
                view[start : start + len(source)] = source
                start += len(source)
            try:
                sock.send(msgpack.packb([slot, lengths]))
            except zmq.Again:
                free.append(slot)  # the receiver is gone or behind: the slot was never handed over
    finally:
        sock.close()
        del view
        ring.close()
