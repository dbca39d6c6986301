"""What an actor or action server reports: counters of its stepping and links, and its finished episodes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from tandem.daemons.actor.links import LearnerLinks
from tandem.daemons.actor.pacing import Pacing
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime

log = logging.getLogger(__name__)
RETURNS_LOG_INTERVAL_S = 30.0  # how often a multi-agent actor's log gets a line of per-agent returns


class ActorReport:
    """Counters into the heartbeat and finished episodes to the supervisor, built only when a heartbeat is due.

    `stepping` is whatever the owner steps (envs, worlds or an action server's games); `extra(now)` adds
    the owner's own counters (an action server's games and replies).
    """

    def __init__(
        self,
        runtime: DaemonRuntime,
        links: LearnerLinks,
        pacing: Pacing,
        extra: Callable[[float], dict[str, Any]] | None = None,
    ):
        self.runtime, self.links, self.pacing, self.extra = runtime, links, pacing, extra
        self.next_returns_log = time.monotonic() + RETURNS_LOG_INTERVAL_S

    def counters(self, stepping: Any, now: float) -> dict[str, Any]:
        counters: dict[str, Any] = {
            "env_steps": stepping.env_steps,
            "episodes": stepping.episodes,
            **self.links.counters(),
            "return_mean": stepping.recent_return_mean(),
            **self.pacing.counters(now),
            **self.links.details(),
        }
        returns = stepping.agent_returns()
        counters.update({f"return.{agent}": value for agent, value in returns.items()})
        if returns and now >= self.next_returns_log:
            self.next_returns_log = now + RETURNS_LOG_INTERVAL_S
            log.info(
                "mean return of recent episodes per agent: %s",
                ", ".join(f"{agent} {value:.2f}" for agent, value in sorted(returns.items())),
            )
        if self.extra is not None:
            counters.update(self.extra(now))
        return counters

    def send(self, stepping: Any, force: bool = False) -> None:
        """When a heartbeat is due (`force`: now), its counters and the finished episodes go; never blocks."""
        reporter, now = self.runtime.reporter, time.monotonic()
        if stepping is not None and (force or now >= reporter.next_beat):
            counters = self.counters(stepping, now)
            reporter.update(counters)
            self.send_episodes(stepping, counters["version"])
        if force:
            reporter.report_now(now)
        elif stepping is not None:
            reporter.tick(now)

    def send_episodes(self, stepping: Any, version: int) -> None:
        channel, episodes = self.runtime.channel, stepping.new_episodes
        if channel is None or not episodes:
            return
        report: dict[str, Any] = {
            "returns": [r for _, r, _ in episodes],
            "lengths": [n for _, _, n in episodes],
            "version": version,
        }
        if stepping.multi_agent:
            report["agents"] = [a for a, _, _ in episodes]
        channel.send("episodes", report)
        episodes.clear()
