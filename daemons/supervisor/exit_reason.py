"""Why a child ended, from what its own incarnation left: its log since it started, its signal or exit code."""

from __future__ import annotations

import signal

from tandem.daemons.runtime import stack_dump
from tandem.daemons.supervisor.children import Child

STACK_LINES = 600  # of a log's tail searched for stack dumps (the daemon's threads, then its workers')


def hung_at(log_tail: str) -> str:
    """'; at FILE:LINE in FUNC' where the daemon's main thread is stuck, and where each env worker is
    (see `stack_dump.where_stuck`); '' without a dump."""
    return stack_dump.where_stuck(log_tail)


ERROR_LINE_CHARS = 300  # of a log line kept as a last error: its end, which says what went wrong
CUT = "..."


def last_error_line(child: Child, code: int) -> str:
    """For a daemon that died without saying why (a crash, a signal): the last error line this incarnation
    wrote to its log (`Child.log_tail` reads no earlier one's), else the signal or the exit code. A SIGKILL is
    never explained by the log: nothing the process wrote caused it (an operator, the OOM killer)."""
    if code < 0 and -code == signal.SIGKILL:
        return "killed by SIGKILL"
    for line in reversed(child.log_tail(20).splitlines()):
        if "error" in line.lower():
            return clip_words(line.strip(), ERROR_LINE_CHARS)
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def clip_words(text: str, limit: int) -> str:
    """The end of `text` within `limit` characters, cut between words and marked with '...' when cut."""
    if len(text) <= limit:
        return text
    start = len(text) - (limit - len(CUT))
    tail = text[start:]
    if not text[start - 1].isspace() and not text[start].isspace():  # inside a word: start at the next one
        rest = tail.split(None, 1)
        tail = rest[1] if len(rest) > 1 else tail  # one word longer than the limit can only be cut
    return CUT + tail.lstrip()
