"""What a learner registers with the supervisor: where its three sockets are bound and how they are secured."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tandem.daemons.runtime.names import replica_rank

SOCKETS = ("transitions", "weights", "snapshot")
REPLICA_SOCKETS = ("transitions",)  # a data-parallel replica above 0: replica 0 serves the group's weights
LINKS = ("curve", "loopback", "insecure")  # how its sockets are reached (insecure: unauthenticated beyond loopback)


@dataclass(frozen=True)
class Registration:
    """One learner's `register` request, checked: actors look its endpoints up, status shows its link."""

    name: str
    role: str
    host: str
    pid: int | None
    endpoints: dict[str, str]
    insecure: bool = False
    public_key: str = ""  # its CurveZMQ public key, "" without CurveZMQ
    link: str = ""  # one of LINKS; "" when it did not say


def sockets_of(name: str) -> tuple[str, ...]:
    """The endpoints a learner named `name` registers: all three, or a replica above 0's transitions only."""
    return REPLICA_SOCKETS if replica_rank(name) > 0 else SOCKETS


def parse_registration(args: Mapping[str, object]) -> Registration | None:
    """The registration `args` describe, or None when they lack one of the endpoints its learner binds."""
    endpoints = args.get("endpoints")
    needed = sockets_of(str(args.get("name", "")))
    if not isinstance(endpoints, dict) or not all(isinstance(endpoints.get(k), str) for k in needed):
        return None
    pid, public_key, link = args.get("pid"), args.get("public_key"), args.get("link")
    return Registration(
        name=str(args.get("name", "")),
        role=str(args.get("role", "")),
        host=str(args.get("host", "")),
        pid=pid if isinstance(pid, int) else None,
        endpoints=dict(endpoints),
        insecure=bool(args.get("insecure", False)),
        public_key=public_key if isinstance(public_key, str) else "",
        link=link if isinstance(link, str) and link in LINKS else "",
    )
