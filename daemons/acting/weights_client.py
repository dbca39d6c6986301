"""Actor side of the weights: subscribe, ask the snapshot socket when needed, verify, keep only newer versions."""

from __future__ import annotations

import logging
import time
from typing import Any

from tandem.daemons.runtime.logs import log_dropped
from tandem.protocol import ProtocolError, WeightBlob, WeightRequest, decode, socket_monitor, sockets

log = logging.getLogger(__name__)

# How soon to ask again when a request could not be sent (no finished handshake yet: the snapshot dealer is
# IMMEDIATE) or the learner had nothing to give: an actor without weights cannot act, so it must not sit out
# a whole refresh period (5-10 s) on a request that never left or came back empty.
RETRY_S = 0.1


class WeightsClient:
    """Hands out each verified weight version newer than the last one handed out, from PUB or snapshot."""

    def __init__(
        self,
        ctx: Any,
        policy_id: str,
        weights_endpoint: str,
        snapshot_endpoint: str,
        requester: str,
        refresh_s: float,
        opts: sockets.SocketOptions = sockets.DEFAULT_SOCKET_OPTIONS,
    ):
        self.policy_id, self.requester, self.refresh_s = policy_id, requester, refresh_s
        self.sub = sockets.weights_sub(ctx, weights_endpoint, opts)
        # A (re)connection of the snapshot socket means a learner (re)appeared: ask it at once.
        self.snapshot, self.monitor = sockets.watched_snapshot_dealer(ctx, snapshot_endpoint, opts)
        self.version = -1
        self.request_due = 0.0
        self.heard_at = time.monotonic()  # the last message from the learner: a blob or a snapshot reply
        self.counters = {
            "blobs_received": 0,
            "blobs_rejected": 0,
            "blobs_stale": 0,
            "snapshot_requests": 0,
            "snapshot_requests_unsent": 0,
        }

    def poll(self, now: float | None = None) -> WeightBlob | None:
        """The newest verified blob newer than `self.version`, or None; never blocks."""
        now = time.monotonic() if now is None else now
        if socket_monitor.connected_since(self.monitor):
            self.request_due = now
        if now >= self.request_due:
            request = WeightRequest(self.policy_id, self.version, self.requester)
            if sockets.send_message(self.snapshot, request):
                self.counters["snapshot_requests"] += 1
                self.request_due = now + self.refresh_s
            else:
                self.counters["snapshot_requests_unsent"] += 1
                self.request_due = now + min(RETRY_S, self.refresh_s)
        newest: WeightBlob | None = None
        for sock in (self.sub, self.snapshot):
            while (frames := sockets.recv_frames(sock, 0)) is not None:
                self.heard_at = now
                blob = self._accept(frames, now)
                if blob is not None and (newest is None or blob.version > newest.version):
                    newest = blob
        if newest is None:
            return None
        try:
            newest.verify_checksum()
        except ProtocolError as exc:
            self.counters["blobs_rejected"] += 1
            log.warning("dropped weights version %d: %s", newest.version, exc)
            return None
        self.version = newest.version
        self.request_due = now + self.refresh_s
        return newest

    def _accept(self, frames: list, now: float) -> WeightBlob | None:
        try:
            message = decode(frames)
        except ProtocolError as exc:
            self.counters["blobs_rejected"] += 1
            log_dropped(log, "a malformed weights message", self.counters["blobs_rejected"], exc)
            return None
        if not isinstance(message, WeightBlob):
            # a control_reply such as up_to_date or no_weights; without any weights yet, ask again soon
            if self.version < 0:
                self.request_due = min(self.request_due, now + RETRY_S)
            return None
        if message.policy_id != self.policy_id:
            self.counters["blobs_rejected"] += 1
            return None
        self.counters["blobs_received"] += 1
        if message.version <= self.version:
            self.counters["blobs_stale"] += 1
            return None
        return message

    def close(self) -> None:
        if self.monitor is not None:
            socket_monitor.stop_watching(self.snapshot, self.monitor)
        for sock in (self.sub, self.snapshot):
            sockets.close(sock, linger_ms=0)
