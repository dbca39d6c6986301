"""The one entry point of every daemon: `tandem actor|learner|evaluator`, forked children, systemd, tmux, Slurm.

Every launcher describes the daemon as a `DaemonSpec` and calls `run(spec)`, which loads the config, sets
up logging, signals and the process name, runs the daemon and turns what ends it into an exit code and
one line on stderr (never a traceback for an error a user can fix).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

from tandem.daemons.config import ConfigError, RunConfig, load_config
from tandem.daemons.runtime import stack_dump
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.runtime.logs import setup_logging
from tandem.daemons.runtime.names import Role, learner_name
from tandem.daemons.runtime.process_name import set_process_name
from tandem.daemons.runtime.signals import StopFlag, die_with_parent
from tandem.daemons.settings.plugins import add_to_path, plugin_folders
from tandem.daemons.settings.setup_errors import SetupError

ROLES = tuple(role.value for role in Role)  # what `tandem ROLE` and a DaemonSpec take
DAEMON_NAME_ENV = "TANDEM_DAEMON"  # set in every daemon (`actor-3`), so a user's env factory can tell where it runs


@dataclass(frozen=True)
class DaemonSpec:
    """Which daemon to run, with what: what `tandem ROLE CONFIG [options]` says on a command line."""

    role: str  # one of ROLES (a Role, or its value)
    config_file: str
    overrides: tuple[str, ...] = ()  # `--set section.key=value`
    control: str | None = None  # the supervisor's control endpoint (heartbeats, lookups, start tokens)
    index: int = 0  # actors: which one
    policy: str = "default"  # learners: the policy trained
    device: str | None = None  # learners: overrides learner.device
    bind: str | None = None  # learners: `tcp://ADDR:PORT` for the three sockets
    insecure: bool = False  # learners and action servers: allow a bind beyond loopback without authentication
    die_with_parent: bool = False  # children of `tandem up`: end when it ends
    supervisor_pid: int | None = None  # with die_with_parent: the supervisor's pid, watched too (forked children)
    plugin_paths: tuple[str, ...] = ()  # children of `tandem up`: the folders of the user's config and of its cwd
    rank: int = 0  # learners with learner.replicas > 1: which replica (0 publishes and checkpoints)
    replica_port: int = 0  # replicas 1..N-1: the port their transitions socket binds (fixed across restarts)

    @property
    def name(self) -> str:
        if self.role == Role.ACTOR:
            return f"actor-{self.index}"
        if self.role == Role.LEARNER:
            return learner_name(self.policy, self.rank)
        return self.role


def make_daemon(spec: DaemonSpec, config: RunConfig, stop: StopFlag) -> Any:
    """The daemon object for `spec`; its module is imported here (torch comes with it)."""
    if spec.role == Role.ACTOR and config.actors.mode == "serve":
        from tandem.daemons.actor.serve.server import GameServer

        return GameServer(config, spec.index, stop, spec.control, insecure=spec.insecure)
    if spec.role == Role.ACTOR:
        from tandem.daemons.actor.daemon import Actor

        return Actor(config, spec.index, stop, spec.control)
    if spec.role == Role.LEARNER:
        from tandem.daemons.learner.daemon import Learner

        return Learner(
            config,
            spec.policy,
            stop,
            spec.control,
            spec.device,
            bind=spec.bind,
            insecure=spec.insecure,
            rank=spec.rank,
            replica_port=spec.replica_port,
        )
    if spec.role == Role.EVALUATOR:
        from tandem.daemons.evaluator.daemon import Evaluator

        return Evaluator(config, stop, spec.control)
    raise ValueError(f"unknown daemon role {spec.role!r}; roles: {', '.join(ROLES)}")


def run(spec: DaemonSpec) -> int:
    """Run the daemon in this process until it stops; returns its exit code."""
    from tandem.daemons.envs.gym_envs import EnvBuildError
    from tandem.daemons.learner.replica_error import ReplicaError
    from tandem.protocol import TransportError

    # An env, network or algorithm module beside the user's config (or in the working directory) is found
    # without PYTHONPATH: children of `tandem up` get those folders in `plugin_paths` (their config_file is
    # the run directory's copy), and a daemon started on its own looks beside its config file. Before the
    # config is read: a plug-in algorithm's module is imported to read its [algorithm] keys.
    add_to_path([*spec.plugin_paths, *plugin_folders(spec.config_file)])
    try:
        config = load_config(spec.config_file, spec.overrides)
    except ConfigError as exc:
        sys.stderr.write(f"error: {spec.config_file}: {exc}\n")
        return int(ExitCode.CONFIG)
    os.environ[DAEMON_NAME_ENV] = spec.name
    setup_logging(config.run.log_level, spec.name)
    set_process_name(f"tandem-{spec.name}")
    if spec.die_with_parent:
        die_with_parent(spec.supervisor_pid)
    stop = StopFlag().install()
    # Where a hung daemon is stuck: the supervisor sends SIGUSR1 before it terminates one; every thread's
    # stack goes to stderr (the daemon's log), its env workers' stacks after it.
    stack_dump.install_in_daemon()
    log = logging.getLogger(spec.name)
    try:
        return int(make_daemon(spec, config, stop).run())
    except SetupError as exc:  # the same at every start: the supervisor makes it FATAL at once, with this line
        log.error("%s", exc)
        sys.stderr.write(f"error: {spec.name}: {exc}\n")
        return int(ExitCode.SETUP)
    except (EnvBuildError, TransportError, ReplicaError, ValueError, OSError) as exc:
        # A user's env constructor that raised: its traceback, not only its message, is what they need.
        log.error("%s", exc, exc_info=isinstance(exc, EnvBuildError) and exc.__cause__ is not None)
        sys.stderr.write(f"error: {spec.name}: {exc}\n")
        return int(ExitCode.FAILURE)
