"""What a process is: its role, and names that say it (`learner-POLICY`, `learner-POLICY@R` for a replica)."""

from __future__ import annotations

from enum import Enum


class Role(str, Enum):
    """The role a daemon runs as; a str, so that a heartbeat's or a status row's plain string compares equal."""

    ACTOR = "actor"
    LEARNER = "learner"
    EVALUATOR = "evaluator"

    def __str__(self) -> str:
        return self.value


def learner_name(policy: str, rank: int = 0) -> str:
    """`learner-POLICY`, and `learner-POLICY@R` for data-parallel replica R > 0."""
    return f"learner-{policy}" + (f"@{rank}" if rank else "")


def learner_policy(name: str) -> str:
    """The policy a learner process named by `learner_name` trains."""
    return name.removeprefix("learner-").split("@", 1)[0]


def replica_rank(name: str) -> int:
    """R of a replica's `learner-POLICY@R`; 0 for replica 0 (named without `@`) and for any other process."""
    _, at, rank = name.partition("@")
    return int(rank) if at and rank.isdigit() else 0
