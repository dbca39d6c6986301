"""The learner's snapshot socket: the latest weights for late joiners, and a counted refusal for anything else."""

from __future__ import annotations

import logging
from typing import Any

from tandem.daemons.learner.opponent_pool import OpponentPool
from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.runtime.worker_thread import WorkerThread
from tandem.protocol import ControlReply, ProtocolError, WeightRequest, decode, sockets
from tandem.protocol.control import reply_address

log = logging.getLogger(__name__)
POLL_MS = 50  # the thread looks at its stop event at least this often
JOIN_TIMEOUT_S = 2.0


def serve_snapshots(
    router: Any,
    policy_id: str,
    version: int,
    latest_frames: list | None,
    counts: dict[str, float],
    pool: OpponentPool | None = None,
) -> None:
    """Answer every waiting request without blocking: the newest blob to a `weight_request` for this policy
    that is behind `version`, `up_to_date` / `no_weights` otherwise, a pooled version to a request naming one
    (`not_in_pool` when it is not kept); every other message is refused with a reply and counted in
    `snapshot_requests_refused` (PROTOCOL.md 2.3)."""
    while (frames := sockets.recv_frames(router, 0)) is not None:
        identity, body = bytes(frames[0]), frames[1:]
        try:
            request = decode(body)
        except ProtocolError as exc:
            refuse(router, counts, "bad_message", str(exc), identity, reply_address(body)[1])
            continue
        if not isinstance(request, WeightRequest):
            refuse(
                router, counts, "bad_kind", f"the snapshot socket takes weight_request, not {request.KIND}", identity
            )
            continue
        if request.policy_id != policy_id:
            refuse(
                router,
                counts,
                "wrong_policy",
                f"this learner trains policy {policy_id!r}, not {request.policy_id!r}",
                identity,
            )
            continue
        if request.version >= 0:
            serve_pooled(router, request.version, pool, counts, identity)
            continue
        if latest_frames is None:
            reply = ControlReply(0, False, "no_weights", "no weights published yet")
        elif request.have_version >= version:
            reply = ControlReply(0, True, "up_to_date", f"version {version}")
        else:
            sockets.send_frames(router, [identity, *latest_frames])
            counts["snapshots_served"] += 1
            continue
        sockets.send_message(router, reply, identity=identity)


def serve_pooled(router: Any, version: int, pool: OpponentPool | None, counts: dict[str, float], identity: bytes):
    """A pooled version's frames as they were published, or `not_in_pool` naming what the pool holds."""
    frames = pool.frames(version) if pool is not None else None
    if frames is None:
        counts["pool_requests_refused"] = counts.get("pool_requests_refused", 0) + 1
        kept = pool.versions if pool is not None else ()
        held = f"it holds {kept[0]}..{kept[-1]} ({len(kept)} versions)" if kept else "it is empty"
        message = f"version {version} is not in this learner's opponent pool; {held}"
        reply = ControlReply(0, False, "not_in_pool", message, data={"version": version})
        sockets.send_message(router, reply, identity=identity)
        return
    sockets.send_frames(router, [identity, *frames])
    counts["pool_snapshots_served"] += 1


def refuse(
    router: Any, counts: dict[str, float], code: str, message: str, identity: bytes, request_id: int = 0
) -> None:
    """Count, log (rate-limited) and answer a snapshot request the learner will not serve."""
    counts["snapshot_requests_refused"] += 1
    log_dropped(log, "a snapshot request", counts["snapshot_requests_refused"], f"{code}: {message}")
    sockets.send_message(router, ControlReply(request_id, False, code, message), identity=identity)


class SnapshotServer:
    """The snapshot socket on a thread of its own, so that a late joiner is answered within milliseconds
    instead of after the update in progress (2-3 s for a Nature CNN on a CPU).

    The training thread hands over each published version with `offer`; only this thread touches the
    socket (ZeroMQ sockets are not thread-safe) and closes it when it ends.
    """

    def __init__(self, policy_id: str, counts: dict[str, float], pool: OpponentPool | None = None):
        self.policy_id, self.counts, self.pool = policy_id, counts, pool
        # (version, frames) replaced as one tuple: an attribute assignment is atomic, so the thread never
        # sees a version with the frames of another.
        self.latest: tuple[int, list | None] = (-1, None)
        self.worker = WorkerThread("snapshot")

    def offer(self, version: int, frames: list | None) -> None:
        """The newest published weights (their frames are never changed after publishing)."""
        self.latest = (version, frames)

    def start(self, router: Any) -> None:
        self.worker.start(self._run, router)

    def _run(self, router: Any) -> None:
        try:
            while not self.worker.stopping:
                if sockets.poll([router], POLL_MS):
                    version, frames = self.latest
                    serve_snapshots(router, self.policy_id, version, frames, self.counts, self.pool)
        finally:
            sockets.close(router, linger_ms=0)

    def check(self) -> None:
        """Raise if the thread ended on its own: actors could no longer join (the supervisor restarts us)."""
        self.worker.check()

    def stop(self, timeout_s: float = JOIN_TIMEOUT_S) -> bool:
        """Ask the thread to end and wait at most `timeout_s`; False if it is still running."""
        return self.worker.stop(timeout_s)
