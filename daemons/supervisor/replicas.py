"""Data-parallel learner replicas as the supervisor sees them: which generation of a group each replica trains in,
where that generation meets, and which replica an actor feeds.

A policy with `learner.replicas = N` has N learner processes (`learner-P`, `learner-P@1` ...). Every replica opens
a store of its own and asks `rendezvous` with its address, the last generation it was given, and the last one whose
state it took (`trained`). Askers gather into the next generation; it is formed when all N have asked or
`learner.reform_window_s` after the first asker that trained in the newest generation (a re-forming): a group
that lost a member goes on without it. The state of the next generation comes from its first member, the asker
that trained most recently (the lowest index among equals): at the first start that is replica 0 with its
checkpoint, later a replica that trained on, never one that only restored or started fresh while others trained.
A replica that asks while a generation trains (a restarted one, a new one) is a joiner: the generation's first
member learns it from a `probe` ask, and the whole generation leaves at one update's end and asks again with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tandem.daemons.config.policies import policy_config
from tandem.daemons.runtime.names import learner_policy, replica_rank
from tandem.daemons.settings.agents import policy_names
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.supervisor.registration import Registration


@dataclass(frozen=True)
class Asker:
    """A replica waiting for the next generation: where its own store listens, the last generation whose state it
    took (-1: none, a fresh or restored process)."""

    store: str
    trained: int


@dataclass
class Group:
    """One policy's replicas: the generation formed last, its members, and who waits for the next one."""

    size: int
    window_s: float  # how long a re-forming waits for more askers after the first
    generation: int = 0  # the last generation formed (0: none yet)
    members: list[int] = field(default_factory=list)  # its replicas, the source of its state first
    master: str = ""  # "host:port" of the store where it met (its first member's)
    forming: dict[int, Asker] = field(default_factory=dict)  # index -> asker of the next generation
    forming_since: float | None = None
    stores: dict[int, str] = field(default_factory=dict)  # the newest generation's members -> their stores
    backend: str = ""  # torch.distributed backend the replicas asked with (the first asker's)
    registered: dict[int, Registration] = field(default_factory=dict)  # index -> what it registered
    seen: set[int] = field(default_factory=set)  # indexes that have registered since this supervisor started

    def formed(self) -> dict[str, object]:
        return {"master": self.master, "generation": self.generation, "members": list(self.members)}

    def waiting(self) -> dict[str, object]:
        return {"master": "", "generation": self.generation, "members": []}


def address_like(value: object) -> bool:
    """'host:port' with a host and a port in 1..65535."""
    if not isinstance(value, str):
        return False
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 1 <= int(port) <= 65535


class ReplicaSets:
    """Every replicated policy of a run (policies with one learner are not here)."""

    def __init__(self, config: RunConfig):
        self.groups = {}
        for policy in policy_names(config):
            learner = policy_config(config, policy).learner
            if learner.replicas > 1:
                self.groups[policy] = Group(learner.replicas, learner.reform_window_s)

    def group_of(self, name: str) -> Group | None:
        return self.groups.get(learner_policy(name)) if name.startswith("learner-") else None

    def rendezvous(self, args: Mapping[str, object], now: float) -> tuple[bool, str, dict[str, object]]:
        """A replica asking for its next generation, or (`probe`) whether a joiner waits: (ok, error, data)."""
        policy, rank, size = args.get("policy"), args.get("rank"), args.get("world_size")
        group = self.groups.get(policy) if isinstance(policy, str) else None
        if group is None:
            known = ", ".join(self.groups) or "none"
            return False, f"policy {policy!r} has no replicas here (replicated policies: {known})", {}
        if type(rank) is not int or not 0 <= rank < group.size or type(size) is not int or size != group.size:
            return (
                False,
                f"rank {rank!r} of {size!r}: policy {policy!r} has {group.size} replicas (ranks 0..{group.size - 1})",
                {},
            )
        if args.get("probe") is True:
            return True, "", {"generation": group.generation, "regroup": bool(group.forming)}
        store, last, trained = args.get("store"), args.get("generation"), args.get("trained", -1)
        if not address_like(store):
            return False, "rendezvous needs store: 'host:port' where this replica's own store listens", {}
        for key, value in (("generation", last), ("trained", trained)):
            if type(value) is not int or not -1 <= value <= group.generation:
                return False, f"{key} must be an int in -1..{group.generation}, got {value!r}", {}
        backend = args.get("backend", "gloo")
        if backend not in ("gloo", "nccl"):
            return False, f"backend must be 'gloo' or 'nccl', got {backend!r}", {}
        if group.backend and backend != group.backend:
            return (
                False,
                f"replica {rank} asks with backend {backend!r}, its group uses {group.backend!r}: set "
                "learner.replica_backend the same for every replica",
                {},
            )
        group.backend = group.backend or str(backend)
        if rank in group.members and last < group.generation and group.stores.get(rank) == store:
            # a member of the newest generation asking for it (again, if the answer was lost: the same process,
            # for its store is the same); a restarted member has a store of its own and joins the next one
            return True, "", group.formed()
        group.forming[rank] = Asker(str(store), trained)
        if group.forming_since is None and group.generation > 0 and trained == group.generation:
            group.forming_since = now  # a member that trained in the newest generation left it: the window opens
        if self.ready(group, now):
            self.form(group)
            return True, "", group.formed()
        return True, "", group.waiting()

    @staticmethod
    def ready(group: Group, now: float) -> bool:
        """All replicas asked; or the window since a member of the newest generation asked has passed. Joiners
        alone (a restarted replica) open no window: the members that trained on must be there, or their state
        would be lost to a joiner's."""
        if len(group.forming) == group.size:
            return True
        return group.forming_since is not None and now - group.forming_since >= group.window_s

    @staticmethod
    def form(group: Group) -> None:
        """The askers become the next generation, the one that trained last (the lowest index among equals) first."""
        order = sorted(group.forming, key=lambda index: (-group.forming[index].trained, index))
        group.generation += 1
        group.members, group.master = order, group.forming[order[0]].store
        group.stores = {index: asker.store for index, asker in group.forming.items()}
        group.forming, group.forming_since = {}, None

    def lost(self, name: str) -> None:
        """A replica ended: actors no longer go to it, and a generation still forming does not wait for it or meet
        at its store. The others go on: they leave their collective at its timeout and re-form without it."""
        group = self.group_of(name)
        if group is None:
            return
        rank = replica_rank(name)
        group.registered.pop(rank, None)
        group.forming.pop(rank, None)
        if not any(asker.trained == group.generation for asker in group.forming.values()):
            group.forming_since = None

    def register(self, name: str, entry: Registration) -> bool:
        """Keep a replica's registration; False if `name` is no replica (registered as a lone learner is)."""
        group = self.group_of(name)
        if group is None:
            return False
        group.registered[replica_rank(name)] = entry
        group.seen.add(replica_rank(name))
        return True

    def feeding(self, policy: str, actor: int) -> Registration | None:
        """What the replica that `actor` sends its transitions to registered: replica (i mod N) while it is
        registered, else one of the registered others (a lost replica's actors go on feeding the group); None
        while none has registered, and while replica (i mod N) has not registered yet: an actor sent elsewhere
        before its own replica started would stay there (that replica is never silent), leaving its own without
        data, and a group updates only when every member has a batch."""
        group = self.groups[policy]
        home = group.registered.get(actor % group.size)
        if home is not None:
            return home
        if actor % group.size not in group.seen:
            return None
        others = sorted(group.registered)
        return group.registered[others[actor % len(others)]] if others else None

    def feeders(self, policy: str, replica: Registration, actors: int) -> int:
        """How many of the run's `actors` send to `replica` as things stand (its own, and a lost replica's)."""
        return sum(1 for actor in range(actors) if self.feeding(policy, actor) is replica)

    def replicated(self, policy: str) -> bool:
        return policy in self.groups
