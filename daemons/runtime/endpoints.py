"""Where a policy's learner binds and where its actors connect, derived from the run config."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tandem.daemons.settings.schema import RunConfig


@dataclass(frozen=True)
class LearnerEndpoints:
    transitions: str
    weights: str
    snapshot: str
    public_key: str = ""  # the learner's CURVE public key, as it registered it; empty: this host's own
    # The actors that send to this learner, when the supervisor says (a replica of a group: its share of the
    # policy's actors, who all follow replica 0's advice); 0: unknown, the learner's own count holds.
    feeders: int = 0


def same_place(a: LearnerEndpoints, b: LearnerEndpoints) -> bool:
    """The same learner at the same addresses (whatever each says of the actors feeding it)."""
    return dataclasses.replace(a, feeders=0) == dataclasses.replace(b, feeders=0)


def learner_endpoints(config: RunConfig) -> LearnerEndpoints:
    """tcp endpoints on `transport.host`; a port of 0 binds a free port (`tandem up` fixes them beforehand)."""
    t = config.transport

    def at(port: int) -> str:
        return f"tcp://{t.host}:{port or '*'}"

    return LearnerEndpoints(at(t.transitions_port), at(t.weights_port), at(t.snapshot_port))


def socket_options(config: RunConfig):
    """The config's [transport] section as protocol socket options."""
    from tandem.daemons.security.curve import curve_keys
    from tandem.protocol.sockets import SocketOptions

    t = config.transport
    return SocketOptions(
        curve=curve_keys(config),
        linger_ms=t.linger_ms,
        transitions_sndhwm_msgs=t.transitions_sndhwm_msgs,
        transitions_rcvhwm_msgs=t.transitions_rcvhwm_msgs,
        transitions_buffer_bytes=t.transitions_buffer_kb << 10,
        weights_hwm_msgs=t.weights_hwm_msgs,
        max_message_bytes=t.max_message_mb << 20,
        heartbeat_ivl_ms=t.heartbeat_ivl_ms,
        heartbeat_timeout_ms=t.heartbeat_timeout_ms,
        connect_timeout_ms=t.connect_timeout_ms,
    )


def is_loopback(endpoint: str) -> bool:
    """ipc://, or tcp:// on 127.x / localhost / ::1."""
    if endpoint.startswith("ipc://"):
        return True
    host = endpoint.removeprefix("tcp://").rsplit(":", 1)[0].strip("[]")
    return host.startswith("127.") or host in ("localhost", "::1")


def bind_endpoints(base: str) -> LearnerEndpoints:
    """`--bind tcp://ADDR:PORT` -> PORT, PORT+1, PORT+2 on ADDR (or three free ports for `tcp://ADDR:*`)."""
    if not base.startswith("tcp://") or ":" not in base.removeprefix("tcp://"):
        raise ValueError(f"--bind {base!r}: expected tcp://ADDRESS:PORT or tcp://ADDRESS:*")
    host, _, port = base.removeprefix("tcp://").rpartition(":")
    if port == "*":
        return LearnerEndpoints(*(f"tcp://{host}:*" for _ in range(3)))
    if not port.isdigit() or not 0 < int(port) <= 65533:
        raise ValueError(f"--bind {base!r}: the port must be a number from 1 to 65533, or *")
    return LearnerEndpoints(*(f"tcp://{host}:{int(port) + i}" for i in range(3)))


LOOKUP_FIRST_WAIT_S, LOOKUP_MAX_WAIT_S = 0.01, 0.2  # between lookups of a learner that has not registered yet


def find_learner(channel, config: RunConfig, policy: str, stop, tick, actor: int | None = None) -> LearnerEndpoints:
    """Where `policy`'s learner is: asked of the supervisor when there is one, else the config's addresses.

    `config` is the policy's view of the run (`policy_config`), whose [transport] holds its learner's ports.
    """
    fallback = learner_endpoints(config)
    if channel is None:
        return fallback
    return lookup_endpoints(channel, policy, fallback, stop, tick, actor)


def lookup_args(policy: str, actor: int | None) -> dict:
    """A `lookup` request's arguments: an actor names itself, so that a replicated policy sends it to its replica."""
    return {"policy": policy} if actor is None else {"policy": policy, "actor": actor}


def lookup_endpoints(
    channel, policy: str, fallback: LearnerEndpoints, stop, tick, actor: int | None = None
) -> LearnerEndpoints:
    """Where `policy`'s learner is, as registered with the supervisor; waits (ticking heartbeats) until it is.

    A control endpoint that does not know the `lookup` command (an old or minimal one) means: use the
    config's addresses.
    """
    import time

    from tandem.daemons.runtime.control_channel import ControlTimeout

    wait_s = LOOKUP_FIRST_WAIT_S
    while not stop:
        tick()
        try:
            reply = channel.request("lookup", lookup_args(policy, actor), timeout_s=2.0)
        except ControlTimeout:
            continue
        if reply.ok:
            return endpoints_of(reply)
        if reply.code == "unknown_command":
            return fallback
        # not registered yet: the learner is still starting. It registers tens of milliseconds after the
        # actors ask at a run's start, so ask again soon, then less often (a learner that takes long to build)
        time.sleep(wait_s)
        wait_s = min(LOOKUP_MAX_WAIT_S, wait_s * 2)
    return fallback


def endpoints_of(reply) -> LearnerEndpoints:
    """The learner's addresses from an ok `lookup` reply."""
    e = reply.data["endpoints"]
    key = reply.data.get("public_key")
    feeders = reply.data.get("feeders")
    feeders = feeders if isinstance(feeders, int) and not isinstance(feeders, bool) and feeders > 0 else 0
    return LearnerEndpoints(e["transitions"], e["weights"], e["snapshot"], key if isinstance(key, str) else "", feeders)


def learner_socket_options(config: RunConfig, endpoints: LearnerEndpoints):
    """Socket options for links to a learner: with CURVE, the learner's public key is the server key."""
    opts = socket_options(config)
    if opts.curve is not None and endpoints.public_key:
        opts = dataclasses.replace(
            opts, curve=dataclasses.replace(opts.curve, server_key=endpoints.public_key.encode())
        )
    return opts
