"""Where a learner is: its three sockets, bound with the security their addresses need, and told to the supervisor."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.endpoints import (
    LearnerEndpoints,
    bind_endpoints,
    is_loopback,
    learner_endpoints,
    socket_options,
)
from tandem.daemons.security.curve import gatekeeper_for
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import sockets

log = logging.getLogger(__name__)
REGISTER_EVERY_S = 5.0  # supervisors restart too: the learner tells it where it is again this often


class Binding:
    """The transitions PULL, the weights PUB and the snapshot ROUTER; `register` tells the supervisor where.

    Loopback binds need nothing; any other needs CurveZMQ keys (a ZAP handler with the allow-list of
    actors' keys, started before the binds so that it fails closed) or `--insecure`, which status shows.
    """

    def __init__(
        self,
        runtime: DaemonRuntime,
        config: RunConfig,
        policy_id: str,
        bind: str | None,
        insecure: bool,
        replica_port: int = 0,
        serves_weights: bool = True,
    ):
        self.runtime, self.config, self.policy_id = runtime, config, policy_id
        # replica 0 (and a lone learner) binds all three; replicas above 0 the transitions PULL only
        self.serves_weights = serves_weights
        self.bind_base, self.insecure = bind, insecure
        self.replica_port = replica_port  # replicas 1..N-1: their transitions port
        self.gatekeeper: Any = None  # the ZAP handler, when this learner binds with CURVE
        self.link = "loopback"  # what status shows for its links: curve, loopback or insecure
        self.public_key = ""
        self.endpoints: dict[str, str] = {}
        self.transitions_pull: Any = None
        self.weights_pub: Any = None
        self.snapshot_router: Any = None
        self.next_register = 0.0

    def bind(self) -> None:
        self.runtime.reporter.set_stage("bind")
        ctx, opts = self.runtime.ctx, socket_options(self.config)
        endpoints = self.planned()
        planned = [endpoints.transitions, *([endpoints.weights, endpoints.snapshot] if self.serves_weights else [])]
        exposed = [e for e in planned if not is_loopback(e) and not sockets.uses_curve(e, opts.curve)]
        if exposed and not self.insecure:
            raise ValueError(
                f"binding {exposed[0]} exposes the learner beyond this machine without keys: set "
                "security.key_dir (`tandem keys create`) for CurveZMQ, or pass --insecure"
            )
        self.gatekeeper = gatekeeper_for(ctx, self.config, planned)  # before the binds: ZAP fails closed
        self.link = sockets.link_security(endpoints.transitions, opts.curve)
        self.public_key = opts.curve.public_key.decode() if opts.curve else ""  # registered: actors check it
        self.transitions_pull = sockets.transitions_pull(ctx, endpoints.transitions, opts)
        self.endpoints = {"transitions": sockets.bound_endpoint(self.transitions_pull)}
        if self.serves_weights:
            self.weights_pub = sockets.weights_pub(ctx, endpoints.weights, opts)
            self.snapshot_router = sockets.snapshot_router(ctx, endpoints.snapshot, opts)
            self.endpoints["weights"] = sockets.bound_endpoint(self.weights_pub)
            self.endpoints["snapshot"] = sockets.bound_endpoint(self.snapshot_router)
        log.info("bound %s%s", self.endpoints, " (INSECURE: no authentication)" if exposed else "")
        self.register()

    def planned(self) -> LearnerEndpoints:
        """Where the three sockets bind: --bind, a replica's own transitions port, or the config's ports."""
        if self.replica_port:
            host = self.config.transport.host
            return LearnerEndpoints(f"tcp://{host}:{self.replica_port}", f"tcp://{host}:*", f"tcp://{host}:*")
        return bind_endpoints(self.bind_base) if self.bind_base else learner_endpoints(self.config)

    def host(self) -> str:
        """The address this learner binds on (the replica group meets there too)."""
        return self.planned().transitions.removeprefix("tcp://").rpartition(":")[0].strip("[]")

    def register(self) -> None:
        """Tell the supervisor where this learner is, so actors can find it (repeated: supervisors restart too)."""
        self.next_register = time.monotonic() + REGISTER_EVERY_S
        if self.runtime.channel is not None:
            self.runtime.channel.send(
                "register",
                {
                    "name": self.runtime.name,
                    "role": "learner",
                    "policy": self.policy_id,
                    "endpoints": self.endpoints,
                    "insecure": self.link == "insecure",
                    "link": self.link,
                    "public_key": self.public_key,
                    "host": self.runtime.reporter.host,
                    "pid": os.getpid(),
                },
            )

    def chores(self, now: float) -> None:
        """Register again when it is time, and take a new allow-list of keys if SIGHUP asked for one."""
        if now >= self.next_register:
            self.register()
            if self.gatekeeper is not None:
                self.gatekeeper.poll()

    def close(self) -> None:
        """Stop the ZAP handler (the sockets themselves go with the context)."""
        if self.gatekeeper is not None:
            self.gatekeeper.stop()
