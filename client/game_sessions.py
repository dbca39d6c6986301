"""A game's sessions with an action server across its restarts, and games run as processes of their own."""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tandem.client.game import AgentError, ServerGone, find_endpoint, find_endpoint_again

RETRY_S = 0.5  # given only an address: the wait before asking it again


def play_sessions(
    session: Callable[[str, float], None],
    run_dir: str | Path,
    seconds: float,
    name: str,
    endpoint: str | None = None,
) -> None:
    """Call `session(address, deadline)` again after each server restart, until `seconds` pass or the run is over.

    A session is one Agent's life: it returns at the deadline, or raises ServerGone or AgentError (written on
    stderr as `name: ...`). The run directory then tells a restarted server's address, or that the run is over.
    Given only `endpoint`, nothing tells a restart from the end of the run: a `shutdown` ends the games, anything
    else has them ask the same address again.
    """
    deadline, address = time.monotonic() + seconds, endpoint
    while time.monotonic() < deadline:
        try:
            address = address or find_endpoint(run_dir, timeout_s=max(1.0, deadline - time.monotonic()))
            session(address, deadline)
        except (ServerGone, AgentError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            if endpoint:
                if exc.code == "shutdown":
                    break
                time.sleep(RETRY_S)
                continue
            try:  # a restarted server's new address, or the end of the run
                address = find_endpoint_again(run_dir, timeout_s=max(1.0, deadline - time.monotonic()))
            except ServerGone:
                address = None
                continue
            if address is None:
                print(f"{name}: the run is over", file=sys.stderr)
                break


def run_game_processes(play: Callable[..., int], each: list[tuple]) -> int:
    """`play(*args)` in a process of its own for each args in `each`, as separate game executables would run;
    the worst exit code once all have ended."""
    games = [multiprocessing.Process(target=play, args=args) for args in each]
    for game in games:
        game.start()
    for game in games:
        game.join()
    return max((game.exitcode or 0) for game in games)
