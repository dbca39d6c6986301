"""The sockets of the wire: each by its role with deliberate options, and timed send and receive (with
socket_monitor.py, which watches their handshakes, the only modules of the daemons that make ZeroMQ sockets)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from tandem.protocol.errors import TransportError
from tandem.protocol.limits import DEFAULT_LIMITS
from tandem.protocol.socket_monitor import watch_connects

# Frames at least this big are sent without copying; smaller ones are cheaper to copy.
ZERO_COPY_MIN_BYTES = 64 * 1024

Socket = zmq.Socket
Tracker = zmq.MessageTracker


ZAP_DOMAIN = "tandem"


@dataclass(frozen=True)
class CurveKeys:
    """CurveZMQ keys (Z85 bytes) of this process, and the public key of the server a connecting socket expects.

    A binding socket becomes a CURVE server and has ZAP decide who may connect (ZAP_ENFORCE_DOMAIN: with no
    authenticator running, nobody may); a connecting one proves its own key and checks the server's.
    """

    public_key: bytes
    secret_key: bytes
    server_key: bytes = b""
    on_loopback: bool = False
    """CURVE on loopback too (tests, or a host whose other users are not trusted); else only beyond it."""


@dataclass(frozen=True)
class SocketOptions:
    """Every option Tandem sets on a socket, in one place; see DESIGN.md's rules of the wire for why."""

    linger_ms: int = 500
    """How long close() may wait to flush queued messages; never infinite."""
    transitions_sndhwm_msgs: int = 4
    """Batches an actor's PUSH queues before a send would block (the actor then keeps its own backlog)."""
    transitions_rcvhwm_msgs: int = 8
    """Batches a learner's PULL queues per connected actor."""
    weights_hwm_msgs: int = 2
    """Weight messages a PUB queues per subscriber (each is a whole model)."""
    transitions_buffer_bytes: int = 256 * 1024
    """Kernel SNDBUF/RCVBUF of transitions sockets: bounds bytes in flight beyond the HWMs (stale data)."""
    control_hwm_msgs: int = 1000
    """Control and heartbeat messages queued per peer."""
    max_message_bytes: int = DEFAULT_LIMITS.max_array_bytes
    """ZMQ_MAXMSGSIZE on receiving sockets: one larger frame disconnects the sender."""
    heartbeat_ivl_ms: int = 1000
    """ZMTP PING interval on TCP links."""
    heartbeat_timeout_ms: int = 5000
    """A TCP peer silent for this long is disconnected."""
    connect_timeout_ms: int = 5000
    """A TCP connect beyond loopback not complete after this long is abandoned and tried again on a new socket."""
    reconnect_ivl_ms: int = 100
    """First reconnect delay after a peer went away."""
    reconnect_ivl_max_ms: int = 2000
    """Longest reconnect delay (exponential backoff up to this)."""
    curve: CurveKeys | None = None
    """Keys for CurveZMQ on links that leave loopback; None: no keys (such links are refused without --insecure)."""


DEFAULT_SOCKET_OPTIONS = SocketOptions()


def new_context() -> zmq.Context:
    """A fresh context; one per process, closed with `close_context`."""
    return zmq.Context()


def close_context(ctx: zmq.Context, linger_ms: int = DEFAULT_SOCKET_OPTIONS.linger_ms) -> None:
    """Close every socket of `ctx` with a bounded linger, then terminate it."""
    ctx.destroy(linger=linger_ms)


def _make(
    ctx: zmq.Context, kind: int, role: str, opts: SocketOptions, endpoint: str, own: Mapping[int, Any]
) -> zmq.Socket:
    """A socket with the options every socket has, then its role's `own` ones, in their order."""
    try:
        sock = ctx.socket(kind)
    except zmq.ZMQError as exc:
        raise TransportError(f"{role}: cannot create socket: {exc}") from exc
    sock.setsockopt(zmq.LINGER, opts.linger_ms)
    sock.setsockopt(zmq.RECONNECT_IVL, opts.reconnect_ivl_ms)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, opts.reconnect_ivl_max_ms)
    if needs_zmtp_heartbeats(endpoint):
        # Without ZMTP heartbeats a frozen peer on TCP goes unnoticed for minutes.
        sock.setsockopt(zmq.HEARTBEAT_IVL, opts.heartbeat_ivl_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, opts.heartbeat_timeout_ms)
        sock.setsockopt(zmq.HEARTBEAT_TTL, opts.heartbeat_timeout_ms)
        # A connect attempt keeps the source address the kernel chose when it began: one begun while the link
        # to the peer was down (routed out of another interface) retried its SYN from that address for about
        # two minutes after the link came back, during which the actors sent nothing. Abandoning it after this
        # long lets the next attempt choose again.
        sock.setsockopt(zmq.CONNECT_TIMEOUT, opts.connect_timeout_ms)
    for option, value in own.items():
        sock.setsockopt(option, value)
    return sock


def needs_zmtp_heartbeats(endpoint: str) -> bool:
    """ZMTP heartbeats on TCP links that can leave this machine, not on loopback or ipc.

    On loopback a dead peer's socket is reset by the kernel at once, and a frozen one is the watchdog's
    job; meanwhile libzmq 4.3.x aborts the whole process (`Assertion failed: !_io_error`,
    stream_engine_base.cpp) when a heartbeating peer vanishes while its pipe is at the high-water mark
    (libzmq issues 3937, 4364): we measured exactly that, a learner killed when an actor was SIGKILLed.
    """
    if not endpoint.startswith("tcp://"):
        return False
    host = endpoint[len("tcp://") :].rsplit(":", 1)[0].strip("[]")
    return not (host.startswith("127.") or host in ("localhost", "::1"))


def uses_curve(endpoint: str, curve: CurveKeys | None) -> bool:
    """Whether a link to or from `endpoint` is encrypted and authenticated: TCP beyond loopback when keys are
    configured (and on loopback too if asked); never ipc, whose file permissions already decide who connects."""
    if curve is None or not endpoint.startswith("tcp://"):
        return False
    return curve.on_loopback or needs_zmtp_heartbeats(endpoint)


def link_security(endpoint: str, curve: CurveKeys | None) -> str:
    """'curve', 'loopback' or 'insecure': what `tandem status` shows for a link."""
    if uses_curve(endpoint, curve):
        return "curve"
    return "insecure" if needs_zmtp_heartbeats(endpoint) else "loopback"


def _secure_server(sock: zmq.Socket, endpoint: str, curve: CurveKeys | None) -> None:
    if uses_curve(endpoint, curve):
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret_key)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public_key)
        sock.setsockopt_string(zmq.ZAP_DOMAIN, ZAP_DOMAIN)
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)  # fail closed: no authenticator, no connection


def _secure_client(sock: zmq.Socket, role: str, endpoint: str, curve: CurveKeys | None) -> None:
    if uses_curve(endpoint, curve):
        if len(curve.server_key) != 40:
            sock.close(linger=0)
            raise TransportError(f"{role}: no public key of the server at {endpoint} to check it against")
        sock.setsockopt(zmq.CURVE_SERVERKEY, curve.server_key)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public_key)
        sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret_key)


def _bind(sock: zmq.Socket, role: str, endpoint: str, curve: CurveKeys | None) -> zmq.Socket:
    _secure_server(sock, endpoint, curve)
    try:
        sock.bind(endpoint)
    except zmq.ZMQError as exc:
        sock.close(linger=0)
        hint = " (ipc paths are limited to about 100 characters)" if endpoint.startswith("ipc://") else ""
        raise TransportError(f"{role}: cannot bind {endpoint}: {exc}{hint}") from exc
    return sock


def _connect(sock: zmq.Socket, role: str, endpoint: str, curve: CurveKeys | None) -> zmq.Socket:
    _secure_client(sock, role, endpoint, curve)
    try:
        sock.connect(endpoint)
    except zmq.ZMQError as exc:
        sock.close(linger=0)
        raise TransportError(f"{role}: cannot connect to {endpoint}: {exc}") from exc
    return sock


def _bound(
    ctx: zmq.Context, kind: int, role: str, endpoint: str, opts: SocketOptions, own: Mapping[int, Any]
) -> zmq.Socket:
    """A socket of `role` with the common options and its `own`, bound to `endpoint` (CURVE where opts ask)."""
    return _bind(_make(ctx, kind, role, opts, endpoint, own), role, endpoint, opts.curve)


def _connected(
    ctx: zmq.Context, kind: int, role: str, endpoint: str, opts: SocketOptions, own: Mapping[int, Any]
) -> zmq.Socket:
    """A socket of `role` with the common options and its `own`, connected to `endpoint` (CURVE where opts ask)."""
    return _connect(_make(ctx, kind, role, opts, endpoint, own), role, endpoint, opts.curve)


def bound_endpoint(sock: zmq.Socket) -> str:
    """The address a socket really bound (with the port chosen for `tcp://127.0.0.1:*`)."""
    return sock.getsockopt_string(zmq.LAST_ENDPOINT)


def transitions_pull(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Learner side of the transitions path: binds, accepts batches from every actor of its policy."""
    own = {
        zmq.RCVHWM: opts.transitions_rcvhwm_msgs,
        zmq.RCVBUF: opts.transitions_buffer_bytes,
        zmq.MAXMSGSIZE: opts.max_message_bytes,
    }
    return _bound(ctx, zmq.PULL, "transitions_pull", endpoint, opts, own)


def transitions_push(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Actor side: connects to one learner; IMMEDIATE so nothing queues for a learner that is not there."""
    own = {zmq.SNDHWM: opts.transitions_sndhwm_msgs, zmq.SNDBUF: opts.transitions_buffer_bytes, zmq.IMMEDIATE: 1}
    return _connected(ctx, zmq.PUSH, "transitions_push", endpoint, opts, own)


def weights_pub(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Learner side: publishes each new version; a tiny SNDHWM so a stalled subscriber costs at most a blob or two."""
    return _bound(ctx, zmq.PUB, "weights_pub", endpoint, opts, {zmq.SNDHWM: opts.weights_hwm_msgs})


def weights_sub(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Actor side: subscribes to everything its policy's learner publishes (no CONFLATE: messages are multipart)."""
    own = {zmq.RCVHWM: opts.weights_hwm_msgs, zmq.MAXMSGSIZE: opts.max_message_bytes, zmq.SUBSCRIBE: b""}
    return _connected(ctx, zmq.SUB, "weights_sub", endpoint, opts, own)


def snapshot_router(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Learner side of the Clone pattern: answers `WeightRequest`s (small: 1 MiB at most) with the latest blob."""
    own = {zmq.SNDHWM: opts.weights_hwm_msgs, zmq.RCVHWM: opts.control_hwm_msgs, zmq.MAXMSGSIZE: 1 << 20}
    return _bound(ctx, zmq.ROUTER, "snapshot_router", endpoint, opts, own)


def snapshot_dealer(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Actor side: asks for the latest weights; IMMEDIATE so a request to an absent learner fails fast."""
    return watched_snapshot_dealer(ctx, endpoint, opts, watch=False)[0]


def watched_snapshot_dealer(
    ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS, *, watch: bool = True
) -> tuple[zmq.Socket, zmq.Socket | None]:
    """A snapshot dealer and, with `watch`, a monitor of its handshakes (read with `connected_since`).

    The monitor is attached before `connect()`: attached after, a connection made at once (the learner
    already bound) reports before anyone listens and the event is lost.
    """
    own = {zmq.IMMEDIATE: 1, zmq.RCVHWM: opts.weights_hwm_msgs, zmq.MAXMSGSIZE: opts.max_message_bytes}
    sock = _make(ctx, zmq.DEALER, "snapshot_dealer", opts, endpoint, own)
    monitor = watch_connects(sock) if watch else None
    try:
        _connect(sock, "snapshot_dealer", endpoint, opts.curve)
    except TransportError:
        if monitor is not None:
            monitor.close(linger=0)
        raise
    return sock, monitor


def control_router(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Supervisor side: CLI requests, registrations and heartbeats from every daemon."""
    own = {zmq.SNDHWM: opts.control_hwm_msgs, zmq.RCVHWM: opts.control_hwm_msgs, zmq.MAXMSGSIZE: 1 << 20}
    return _bound(ctx, zmq.ROUTER, "control_router", endpoint, opts, own)


def control_dealer(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """Daemon or CLI side of the control socket."""
    own = {zmq.SNDHWM: opts.control_hwm_msgs, zmq.MAXMSGSIZE: opts.max_message_bytes}
    return _connected(ctx, zmq.DEALER, "control_dealer", endpoint, opts, own)


def game_router(
    ctx: zmq.Context,
    endpoint: str,
    max_message_bytes: int,
    hwm_msgs: int = 64,
    opts: SocketOptions = DEFAULT_SOCKET_OPTIONS,
) -> zmq.Socket:
    """Action server side of the game protocol: binds; games connect. ROUTER_MANDATORY so a reply to a game
    that is gone or not reading fails (counted) instead of vanishing; MAXMSGSIZE drops a sender of a huge frame."""
    own = {zmq.ROUTER_MANDATORY: 1, zmq.SNDHWM: hwm_msgs, zmq.RCVHWM: hwm_msgs, zmq.MAXMSGSIZE: max_message_bytes}
    return _bind(_make(ctx, zmq.ROUTER, "game_router", opts, endpoint, own), "game_router", endpoint, None)


def game_dealer(ctx: zmq.Context, endpoint: str, opts: SocketOptions = DEFAULT_SOCKET_OPTIONS) -> zmq.Socket:
    """A game's side: connects to one action server; replies are matched to requests by their request_id."""
    # No IMMEDIATE: with it, libzmq discards what came in but was not yet read when the connection closes,
    # and a stopping server's `shutdown` notice arrives just before it closes (PROTOCOL.md 7.5).
    sock = _make(ctx, zmq.DEALER, "game_dealer", opts, endpoint, {zmq.MAXMSGSIZE: 64 << 20})
    return _connect(sock, "game_dealer", endpoint, None)


def send_to(sock: zmq.Socket, identity: bytes, frames: Sequence[Any]) -> bool:
    """Send to one peer of a ROUTER_MANDATORY socket; False when it is gone or its queue is full (never waits)."""
    try:
        return bool(send_frames(sock, [identity, *frames]))
    except TransportError:
        return False  # EHOSTUNREACH: the peer disconnected


def send_frames(
    sock: zmq.Socket, frames: Sequence[Any], *, timeout_ms: int = 0, track: bool = False
) -> Tracker | None | bool:
    """Send one multipart message; False if it could not be queued within `timeout_ms` (0: don't wait).

    Frames of `ZERO_COPY_MIN_BYTES` or more are handed to ZeroMQ without copying: the caller must not
    change those buffers until the returned tracker (when `track` is set) says done. Returns True, or the
    tracker when `track` is set, once the message is queued.
    """
    trackers = []
    try:
        if timeout_ms > 0 and not sock.poll(timeout_ms, zmq.POLLOUT):
            return False
        last = len(frames) - 1
        for i, frame in enumerate(frames):
            flags = zmq.NOBLOCK | (zmq.SNDMORE if i < last else 0)
            big = memoryview(frame).nbytes >= ZERO_COPY_MIN_BYTES
            result = sock.send(frame, flags, copy=not big, track=track and big)
            if isinstance(result, zmq.MessageTracker):
                trackers.append(result)
        # ZeroMQ queues a multipart message atomically: only the first frame can hit the HWM.
    except zmq.Again:
        return False
    except zmq.ZMQError as exc:
        raise TransportError(f"send failed: {exc}") from exc
    return zmq.MessageTracker(*trackers) if track else True


def send_message(sock: zmq.Socket, message: Any, *, timeout_ms: int = 0, identity: bytes | None = None) -> bool:
    """Encode and send a protocol message (to `identity` on a ROUTER); False when it could not be queued."""
    frames = message.to_frames()
    if identity is not None:
        frames = [identity, *frames]
    return bool(send_frames(sock, frames, timeout_ms=timeout_ms))


def recv_frames(sock: zmq.Socket, timeout_ms: int) -> list[zmq.Frame] | None:
    """The next multipart message, or None when nothing arrived within `timeout_ms` (never waits forever)."""
    try:
        if timeout_ms > 0 and not sock.poll(timeout_ms, zmq.POLLIN):
            return None
        return sock.recv_multipart(zmq.NOBLOCK, copy=False)
    except zmq.Again:
        return None
    except zmq.ZMQError as exc:
        raise TransportError(f"receive failed: {exc}") from exc


def poll(sockets: Iterable[zmq.Socket], timeout_ms: int) -> set[zmq.Socket]:
    """The subset of `sockets` with a message waiting, after at most `timeout_ms`."""
    poller = zmq.Poller()
    for sock in sockets:
        poller.register(sock, zmq.POLLIN)
    try:
        return {sock for sock, _ in poller.poll(timeout_ms)}
    except zmq.ZMQError as exc:
        raise TransportError(f"poll failed: {exc}") from exc


def writable(sock: zmq.Socket) -> bool:
    """True if a send would be queued now (never waits)."""
    try:
        return bool(sock.poll(0, zmq.POLLOUT))
    except zmq.ZMQError as exc:
        raise TransportError(f"poll failed: {exc}") from exc


def close(sock: zmq.Socket, linger_ms: int = DEFAULT_SOCKET_OPTIONS.linger_ms) -> None:
    """Close with a bounded linger (the default of ZeroMQ can hang shutdown forever)."""
    sock.close(linger=linger_ms)
