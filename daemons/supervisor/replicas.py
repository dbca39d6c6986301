"""Data-parallel learner replicas as the supervisor sees them: where each group meets, and which replica an actor feeds.

A policy with `learner.replicas = N` has N learner processes (`learner-P`, `learner-P@1` ...). Replica 0 opens
the group's store and posts its address (`rendezvous` with `master`); the others ask for it until a fresh one
is posted. When any replica ends, the posted address is withdrawn and the others are restarted with it: a
group re-forms whole, from replica 0's last checkpoint, never half of it from an older state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tandem.daemons.config.policies import policy_config, policy_names
from tandem.daemons.config.schema import RunConfig
from tandem.daemons.runtime.names import learner_name, learner_policy


@dataclass
class Group:
    """One policy's replicas: the size, the address replica 0 posted for this generation, and who registered."""

    size: int
    generation: int = 0
    master: str = ""  # "host:port" of replica 0's store; empty while none is posted
    registered: dict[int, dict[str, Any]] = field(default_factory=dict)  # rank -> what it registered
    joined: set[int] = field(default_factory=set)  # ranks that were given this generation's address


class ReplicaSets:
    """Every replicated policy of a run (policies with one learner are not here)."""

    def __init__(self, config: RunConfig):
        self.groups = {
            policy: Group(size)
            for policy in policy_names(config)
            if (size := policy_config(config, policy).learner.replicas) > 1
        }

    def group_of(self, name: str) -> Group | None:
        return self.groups.get(learner_policy(name)) if name.startswith("learner-") else None

    def siblings(self, name: str) -> list[str]:
        """The other replicas of the learner `name` (none if its policy has one learner)."""
        policy = learner_policy(name)
        group = self.groups.get(policy)
        if group is None:
            return []
        return [n for rank in range(group.size) if (n := learner_name(policy, rank)) != name]

    def rendezvous(self, args: dict[str, Any]) -> tuple[bool, str, dict[str, Any]]:
        """A replica posting (rank 0, with `master`) or asking for the group's address: (ok, error, data)."""
        policy, rank, size = args.get("policy"), args.get("rank"), args.get("world_size")
        group = self.groups.get(policy) if isinstance(policy, str) else None
        if group is None:
            known = ", ".join(self.groups) or "none"
            return False, f"policy {policy!r} has no replicas here (replicated policies: {known})", {}
        if not isinstance(rank, int) or not 0 <= rank < group.size or size != group.size:
            return (
                False,
                f"rank {rank!r} of {size!r}: policy {policy!r} has {group.size} replicas (ranks 0..{group.size - 1})",
                {},
            )
        master = args.get("master")
        if rank == 0:
            if not isinstance(master, str) or ":" not in master:
                return False, "replica 0 posts master: 'host:port' of its store", {}
            group.generation += 1
            group.master, group.joined = master, {0}
        elif group.master and rank in group.joined:
            # asked twice in one generation: this replica restarted (by itself, or where it runs), so the group
            # it was in is gone; the others leave it by timeout, and replica 0 posts a new address when it restarts
            group.master, group.joined = "", set()
        elif group.master:
            group.joined.add(rank)
        return True, "", {"master": group.master, "generation": group.generation}

    def lost(self, name: str) -> None:
        """A replica ended: the group it was in is gone; the next replica 0 posts a new address."""
        group = self.group_of(name)
        if group is not None:
            group.master, group.joined = "", set()
            group.registered.pop(rank_of(name), None)

    def register(self, name: str, entry: dict[str, Any]) -> bool:
        """Keep a replica's registration; False if `name` is no replica (registered as a lone learner is)."""
        group = self.group_of(name)
        if group is None:
            return False
        group.registered[rank_of(name)] = entry
        return True

    def feeding(self, policy: str, actor: int) -> dict[str, Any] | None:
        """What the replica that `actor` sends its transitions to registered (actor i -> replica i mod N), or
        None while it has not registered; an actor's stream always goes to the same replica."""
        group = self.groups[policy]
        return group.registered.get(actor % group.size)

    def replicated(self, policy: str) -> bool:
        return policy in self.groups


def rank_of(name: str) -> int:
    """The replica rank in a learner's name (`learner-P@2` -> 2; `learner-P` -> 0)."""
    _, _, rank = name.partition("@")
    return int(rank) if rank.isdigit() else 0
