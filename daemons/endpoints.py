"""Where a policy's learner binds and where its actors connect, derived from the run config."""

from __future__ import annotations

from dataclasses import dataclass

from daemons.config.schema import RunConfig


@dataclass(frozen=True)
class LearnerEndpoints:
    transitions: str
    weights: str
    snapshot: str


def learner_endpoints(config: RunConfig) -> LearnerEndpoints:
    """tcp endpoints on `transport.host`; a port of 0 binds a free port (`tandem up` fixes them beforehand)."""
    t = config.transport

    def at(port: int) -> str:
        return f"tcp://{t.host}:{port or '*'}"

    return LearnerEndpoints(at(t.transitions_port), at(t.weights_port), at(t.snapshot_port))


def socket_options(config: RunConfig):
    """The config's [transport] section as protocol socket options."""
    from protocol.sockets import SocketOptions

    t = config.transport
    return SocketOptions(
        linger_ms=t.linger_ms, transitions_sndhwm_msgs=t.transitions_sndhwm_msgs,
        transitions_rcvhwm_msgs=t.transitions_rcvhwm_msgs, transitions_buffer_bytes=t.transitions_buffer_kb << 10, weights_hwm_msgs=t.weights_hwm_msgs,
        max_message_bytes=t.max_message_mb << 20, heartbeat_ivl_ms=t.heartbeat_ivl_ms,
        heartbeat_timeout_ms=t.heartbeat_timeout_ms,
    )
