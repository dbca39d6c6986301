"""Caps the CPU threads torch may use in this process, so actors and learners do not starve each other."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)


def set_torch_threads(n: int) -> None:
    """Set torch's intra-op and inter-op thread counts to `n` (at least 1).

    The inter-op count can only be set once per process and only before any parallel work has run; a
    later call keeps the count already in force and logs it at debug level instead of raising.
    """
    if n < 1:
        raise ValueError(f"torch threads must be at least 1, got {n}")
    torch.set_num_threads(n)
    if torch.get_num_interop_threads() == n:
        return
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError as exc:
        log.debug("inter-op threads stay at %d (%s)", torch.get_num_interop_threads(), exc)
