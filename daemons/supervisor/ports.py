"""A one-machine run's process table and ports: every port of 0 fixed to a free one before any daemon starts."""

from __future__ import annotations

import socket
from dataclasses import replace

from tandem.daemons.config import RunConfig
from tandem.daemons.config.policies import policy_config
from tandem.daemons.main import DaemonSpec
from tandem.daemons.settings.agents import PORT_KEYS, policy_names, port_table


def free_port(host: str) -> int:
    """A port that was free on `host` a moment ago (the daemon that binds it is started right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def fix_ports(config: RunConfig) -> RunConfig:
    """Replace every port of 0 with a free one, so restarted learners bind the same addresses."""
    t = config.transport
    taken = set(port_table(config).values())

    def fixed(section, keys):
        chosen = {}
        for key in keys:
            if getattr(section, key) == 0:
                port = free_port(t.host)
                while port in taken:
                    port = free_port(t.host)
                taken.add(port)
                chosen[key] = port
        return replace(section, **chosen)

    if not config.policies:
        return replace(
            config, transport=fixed(t, ("transitions_port", "weights_port", "snapshot_port", "control_port"))
        )
    policies = {name: fixed(section, PORT_KEYS) for name, section in config.policies.items()}
    return replace(config, transport=fixed(t, ("control_port",)), policies=policies)


def plan_children(config: RunConfig, insecure: bool = False) -> list[DaemonSpec]:
    """The learners (one per policy, or its replicas), the actors and the evaluator of a one-machine run."""
    specs = []
    for policy in policy_names(config):
        learner = policy_config(config, policy).learner
        if learner.remote:
            continue
        specs.append(DaemonSpec("learner", "", policy=policy, insecure=insecure))
        # replicas 1..N-1: a transitions port each, fixed now so that their actors find them again after a restart
        specs += [
            DaemonSpec(
                "learner",
                "",
                policy=policy,
                insecure=insecure,
                rank=rank,
                replica_port=free_port(config.transport.host),
            )
            for rank in range(1, learner.replicas)
        ]
    specs += [
        DaemonSpec("actor", "", index=i, insecure=insecure) for i in range(config.actors.count)
    ]  # serve mode binds
    if config.eval.enabled:
        specs.append(DaemonSpec("evaluator", ""))
    return specs
