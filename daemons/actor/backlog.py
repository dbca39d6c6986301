"""An actor's outgoing batches while its learner is slow or gone: bounded, dropping the oldest, counting drops."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any


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
