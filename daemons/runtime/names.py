"""Daemon names that say what a process is: `learner-POLICY`, and `learner-POLICY@R` for a data-parallel replica."""

from __future__ import annotations


def learner_name(policy: str, rank: int = 0) -> str:
    """`learner-POLICY`, and `learner-POLICY@R` for data-parallel replica R > 0."""
    return f"learner-{policy}" + (f"@{rank}" if rank else "")


def learner_policy(name: str) -> str:
    """The policy a learner process named by `learner_name` trains."""
    return name.removeprefix("learner-").split("@", 1)[0]
