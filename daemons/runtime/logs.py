"""Logging set-up for a daemon, and log lines for dropped input that a flood cannot multiply."""

from __future__ import annotations

import logging
import sys


def setup_logging(level: str, name: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        stream=sys.stderr,
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
    )


def log_dropped(logger: logging.Logger, what: str, count: int, reason: object) -> None:
    """Log a dropped message at counts 1, 2, 4, 8, ... so a flood of bad input cannot flood the log."""
    if count & (count - 1) == 0:
        logger.warning("dropped %s (%d so far): %s", what, count, reason)
