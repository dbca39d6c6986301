"""When the evaluator plays its next round: no sooner than `eval.interval_s`, and within its share of the CPU.

An evaluation round costs as much CPU as acting does (a greedy pass per step, the env's own stepping),
and on a 2-core machine a back-to-back evaluator takes half of it from training. After a round that
used `cpu_s` seconds of CPU, the evaluator waits until its average since the round started is at most
`eval.max_cpu_share` of the machine's cores; on a machine with many cores the same share is more than
the one core it can use, and only `interval_s` applies.
"""

from __future__ import annotations

import os


def machine_cores() -> int:
    """Cores this process may run on (its affinity; a container's cpuset), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Cadence:
    """Plans each next round and keeps what `tandem status` shows about the evaluator's cost."""

    def __init__(self, interval_s: float, max_cpu_share: float, cores: int, started: float, cpu_now: float):
        self.interval_s = interval_s
        self.cores_allowed = max_cpu_share * cores  # cores' worth of CPU the evaluator may use on average
        self.started, self.cpu_at_start = started, cpu_now
        self.round_s = 0.0
        self.wait_s = 0.0

    def next_round_at(self, round_started: float, round_ended: float, round_cpu_s: float) -> float:
        """The earliest start of the next round (monotonic seconds)."""
        self.round_s = round_ended - round_started
        by_interval = round_started + self.interval_s
        # spread the round's CPU over enough wall time: cpu / (wall + wait) <= cores_allowed
        by_share = round_started + round_cpu_s / self.cores_allowed if self.cores_allowed > 0 else round_ended
        next_at = max(by_interval, by_share, round_ended)
        self.wait_s = next_at - round_ended
        return next_at

    def counters(self, now: float, cpu_now: float) -> dict[str, float]:
        """The evaluator's cost: cores used on average since it started, its last round and the pause after it."""
        wall = now - self.started
        return {
            "eval_cpu_cores": round((cpu_now - self.cpu_at_start) / wall, 3) if wall > 0 else 0.0,
            "eval_round_s": round(self.round_s, 2),
            "eval_wait_s": round(self.wait_s, 2),
            "eval_cores_allowed": round(self.cores_allowed, 2),
        }
