"""How far a learner is, shared by its parts: its counters, its weight version and the env steps behind them."""

from __future__ import annotations

from dataclasses import dataclass, field

# The learner's own counters, in the order its heartbeat and metrics.jsonl list them; the intake adds its own.
LEARNER_COUNTS = (
    "batches_received",
    "batches_malformed",
    "batches_stale",
    "batches_foreign",
    "batches_over_ratio",
    "transitions_inserted",
    "updates",
    "snapshots_served",
    "checkpoints",
    "snapshot_requests_refused",
    "disk_write_failures",
)


@dataclass
class Progress:
    """Each counter has one writer (the intake its INTAKE_COUNTS, the snapshot server `snapshots_*`, the
    training step `updates`, ...); the version is set at start (checkpoint and floor) and rises with each
    publish, never down, across restarts too."""

    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LEARNER_COUNTS, 0))
    version: int = -1
    env_steps_before: int = 0  # transitions received by earlier incarnations (from the checkpoint)

    @property
    def env_steps(self) -> int:
        """Transitions received for this policy over the run, earlier incarnations included (sent with each version)."""
        return self.env_steps_before + int(self.counts["transitions_received"])
