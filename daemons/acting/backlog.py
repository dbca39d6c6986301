"""An actor's outgoing batches while its learner is slow or gone: bounded, dropping the oldest, counting drops."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

from tandem.protocol import keyed
from tandem.protocol.joining import join_unrolls, joinable

# Joining stops before a message's observations pass this size: per-message costs matter for small unrolls
# only, and big joined messages measured slower (whole-stack Atari unrolls of 1 MB: 0.20x raw pyzmq joined by 8).
# Frame-stacked unrolls sent once (a quarter of that) join by 4.
JOIN_MAX_BYTES = 1 << 20


class Backlog:
    """At most `max_batches` encoded batches; pushing onto a full backlog drops the oldest one."""

    def __init__(self, max_batches: int):
        self.queue: deque[Any] = deque()
        self.max_batches = max_batches
        self.dropped = 0
        self.sent = 0

    def __len__(self) -> int:
        return len(self.queue)

    def push(self, frames: Any) -> None:
        if len(self.queue) >= self.max_batches:
            self.queue.popleft()
            self.dropped += 1
        self.queue.append(frames)

    def flush(self, send: Callable[[Any], bool]) -> int:
        """Send oldest-first while `send` accepts (it must not block); returns how many went out."""
        sent = 0
        while self.queue and send(self.queue[0]):
            self.queue.popleft()
            sent += 1
        self.sent += sent
        return sent


class JoiningBacklog(Backlog):
    """A backlog of unrolls: each send joins up to `max_join` consecutive ones of a stream into one message.

    Joining only happens when unrolls wait (the learner is slower than the actor), so it costs no latency;
    the receiver then pays its per-message costs (decode, checks, the n-step set-up) once per message.
    A stream's messages are numbered by what is sent: `seq` rises by one per message, by two where
    unrolls between them were dropped, so the learner's n-step windows still see every gap.
    """

    def __init__(self, max_batches: int, max_join: int = 1):
        super().__init__(max_batches)
        self.max_join = max(1, max_join)
        self.messages = 0
        self.streams: dict[tuple[str, str, int], tuple[int, int]] = {}  # -> (last unroll seq sent, its message seq)

    def flush(self, send: Callable[[Any], bool], writable: Callable[[], bool] = lambda: True) -> int:
        """Encode and send while `writable()` and `send` accept; returns how many unrolls went out."""
        sent = 0
        while self.queue and writable():
            run, size = [self.queue[0]], keyed.nbytes(self.queue[0].obs)
            while len(run) < min(self.max_join, len(self.queue)):
                nxt = self.queue[len(run)]
                if size + keyed.nbytes(nxt.obs) > JOIN_MAX_BYTES or not joinable(run[-1], nxt):
                    break
                run.append(nxt)
                size += keyed.nbytes(nxt.obs)
            batch = join_unrolls(run)
            key = (batch.policy_id, batch.actor_id, batch.incarnation)
            seq = self.message_seq(key, run[0].seq)
            if not send(dataclasses.replace(batch, seq=seq).to_frames()):
                break
            self.streams[key] = (run[-1].seq, seq)
            for _ in run:
                self.queue.popleft()
            sent += len(run)
            self.messages += 1
        self.sent += sent
        return sent

    def message_seq(self, key: tuple[str, str, int], first_seq: int) -> int:
        last = self.streams.get(key)
        if last is None:
            return first_seq
        last_unroll, last_message = last
        return last_message + (1 if first_seq == last_unroll + 1 else 2)
