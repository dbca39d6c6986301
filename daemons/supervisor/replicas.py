"""Data-parallel learner replicas as the supervisor sees them: where each group meets, and which replica an actor feeds.

A policy with `learner.replicas = N` has N learner processes (`learner-P`, `learner-P@1` ...). Replica 0 opens
the group's store and posts its address (`rendezvous` with `master`); the others ask for it until a fresh one
is posted. When a replica of the posted generation ends, the address is withdrawn and the others of that
generation are restarted with it: a group re-forms whole, from replica 0's last checkpoint, never half of it from
an older state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tandem.daemons.config.policies import policy_config
from tandem.daemons.runtime.names import learner_name, learner_policy, replica_rank
from tandem.daemons.settings.agents import policy_names
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.supervisor.registration import Registration


@dataclass
class Group:
    """One policy's replicas: the size, the address replica 0 posted for this generation, and who registered."""

    size: int
    generation: int = 0
    master: str = ""  # "host:port" of replica 0's store; empty while none is posted
    registered: dict[int, Registration] = field(default_factory=dict)  # rank -> what it registered
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

    def rendezvous(self, args: Mapping[str, object]) -> tuple[bool, str, dict[str, object]]:
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

    def lost(self, name: str) -> list[str]:
        """A replica ended: the other replicas of the generation it had joined (they restart with it), none if it
        had joined none.

        A replica that ended before it joined the posted generation (one lost with an older group, or killed
        while it started) leaves that generation standing: its restart asks again and joins it. Withdrawing that
        generation too would end a fresh group that was only waiting for it, and restart its members for nothing."""
        group = self.group_of(name)
        if group is None:
            return []
        rank = replica_rank(name)
        group.registered.pop(rank, None)
        if rank not in group.joined:
            return []
        members = sorted(group.joined - {rank})
        group.master, group.joined = "", set()
        policy = learner_policy(name)
        return [learner_name(policy, member) for member in members]

    def register(self, name: str, entry: Registration) -> bool:
        """Keep a replica's registration; False if `name` is no replica (registered as a lone learner is)."""
        group = self.group_of(name)
        if group is None:
            return False
        group.registered[replica_rank(name)] = entry
        return True

    def feeding(self, policy: str, actor: int) -> Registration | None:
        """What the replica that `actor` sends its transitions to registered (actor i -> replica i mod N), or
        None while it has not registered; an actor's stream always goes to the same replica."""
        group = self.groups[policy]
        return group.registered.get(actor % group.size)

    def replicated(self, policy: str) -> bool:
        return policy in self.groups
