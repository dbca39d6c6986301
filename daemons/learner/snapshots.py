"""The learner's snapshot socket: the latest weights for late joiners, and a counted refusal for anything else."""

from __future__ import annotations

import logging
from typing import Any

from daemons.runtime.logs import log_dropped
from protocol import ControlReply, ProtocolError, WeightRequest, decode, sockets
from protocol.control import reply_address

log = logging.getLogger(__name__)


def serve_snapshots(router: Any, policy_id: str, version: int, latest_frames: list | None,
                    counts: dict[str, float]) -> None:
    """Answer every waiting request without blocking: the newest blob to a `weight_request` for this policy
    that is behind `version`, `up_to_date` / `no_weights` otherwise; every other message is refused with
    a reply and counted in `snapshot_requests_refused` (PROTOCOL.md 2.3)."""
    while (frames := sockets.recv_frames(router, 0)) is not None:
        identity, body = bytes(frames[0]), frames[1:]
        try:
            request = decode(body)
        except ProtocolError as exc:
            refuse(router, counts, "bad_message", str(exc), identity, reply_address(body)[1])
            continue
        if not isinstance(request, WeightRequest):
            refuse(router, counts, "bad_kind", f"the snapshot socket takes weight_request, not {request.KIND}", identity)
            continue
        if request.policy_id != policy_id:
            refuse(router, counts, "wrong_policy", f"this learner trains policy {policy_id!r}, not "
                   f"{request.policy_id!r}", identity)
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


def refuse(router: Any, counts: dict[str, float], code: str, message: str, identity: bytes, request_id: int = 0) -> None:
    """Count, log (rate-limited) and answer a snapshot request the learner will not serve."""
    counts["snapshot_requests_refused"] += 1
    log_dropped(log, "a snapshot request", counts["snapshot_requests_refused"], f"{code}: {message}")
    sockets.send_message(router, ControlReply(request_id, False, code, message), identity=identity)
