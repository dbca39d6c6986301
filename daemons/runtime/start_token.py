"""Wait for one of the supervisor's start tokens before building envs: at most N daemons build at once."""

from __future__ import annotations

import logging
import time
from typing import Any

from tandem.daemons.runtime.control_channel import ControlTimeout

log = logging.getLogger(__name__)
ASK_TIMEOUT_S = 2.0  # one request's wait; a silent supervisor is asked again, with the heartbeats going on
RETRY_S = 0.1


def wait_start_token(channel: Any, name: str, reporter: Any, stopped: Any) -> None:
    """Return once the supervisor grants `name` a token (or has none to give), or when `stopped()` is true.

    The token goes back when the daemon's heartbeat shows a stage past building (the supervisor sees it)."""
    if channel is None:
        return
    reporter.set_stage("wait_start_token")
    while not stopped():
        reporter.tick()
        try:
            reply = channel.request("start_token", {"name": name}, timeout_s=ASK_TIMEOUT_S)
            if reply.data.get("granted") or (not reply.ok and reply.code == "unknown_command"):
                return  # granted, or a control endpoint that hands out no tokens
        except ControlTimeout:
            log.warning("no answer from the supervisor about a start token; asking again")
        time.sleep(RETRY_S)
