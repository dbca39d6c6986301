"""An action server's figures for its heartbeat: requests/s, mean batch size, action latency p50/p99, errors by code."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from tandem.daemons.runtime.rate_meter import RateMeter

LATENCY_WINDOW = 4096  # the latest requests whose latency the percentiles cover


class ServeStats:
    """Counts what the server did; `counters(now)` turns it into heartbeat counters (numbers only)."""

    def __init__(self):
        self.requests = 0  # steps answered with an action
        self.inferences = 0
        self.window_requests = 0  # since the last report: the mean batch size of the latest interval
        self.window_inferences = 0
        self.latencies_ms: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.errors: dict[str, int] = {}  # a game's messages refused, by code
        self.replies_dropped = 0  # a reply to a game that is gone or not reading
        self.rate = RateMeter()

    def batch(self, size: int, received_at: list[float], now: float) -> None:
        self.requests += size
        self.inferences += 1
        self.window_requests += size
        self.window_inferences += 1
        self.latencies_ms.extend((now - t) * 1000.0 for t in received_at)

    def error(self, code: str) -> int:
        self.errors[code] = self.errors.get(code, 0) + 1
        return sum(self.errors.values())

    def counters(self, now: float) -> dict[str, float]:
        self.rate.add(now, self.requests)
        out: dict[str, float] = {
            "serve_requests": self.requests,
            "serve_inferences": self.inferences,
            "serve_requests_per_s": round(self.rate.rate(), 1),
            "game_errors": sum(self.errors.values()),
            "replies_dropped": self.replies_dropped,
        }
        # 0 when nothing was served since the last report (a heartbeat keeps a counter it is not sent again)
        out["serve_batch_mean"] = (
            round(self.window_requests / self.window_inferences, 2) if self.window_inferences else 0.0
        )
        self.window_requests = self.window_inferences = 0
        if self.latencies_ms:
            p50, p99 = np.percentile(np.fromiter(self.latencies_ms, float), [50, 99])
            out["serve_latency_p50_ms"], out["serve_latency_p99_ms"] = round(float(p50), 3), round(float(p99), 3)
        out.update({f"game_errors.{code}": n for code, n in self.errors.items()})
        return out


def server_counters(stats: ServeStats, games: Any, endpoint: str, now: float) -> dict[str, float]:
    """An action server's own share of its heartbeat: `stats`, its games' counts and numbers, its port."""
    counters = {**stats.counters(now), **games.counts, "games": len(games.sessions), "streams": games.open_streams}
    port = endpoint.rpartition(":")[2]
    if port.isdigit():
        counters["serve_port"] = int(port)
    return counters
