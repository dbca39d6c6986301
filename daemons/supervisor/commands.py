"""The supervisor's control commands: one table of handlers, each with its arguments and reply documented.

A request is `ControlRequest(request_id, command, args)` on the control ROUTER; every request gets one
`ControlReply` with the same `request_id`: `ok` true with `data`, or `ok` false with a stable `code`
(`unknown_command`, `bad_args`, `unknown_process`, `not_managed`, `not_registered`; `bad_message` from
the loop for what does not decode) and a message for
people. `protocol/PROTOCOL.md` lists the same table for implementers in other languages.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.status import status_data
from tandem.protocol import ControlReply, ControlRequest

if TYPE_CHECKING:  # the supervisor builds these helpers' arguments; they never import it at run time
    from tandem.daemons.supervisor.supervisor import Supervisor


@dataclass(frozen=True)
class Command:
    """A control command: its handler, who sends it, its arguments and what the reply's `data` holds."""

    handler: Callable[[Supervisor, ControlRequest, float], ControlReply]
    sender: str
    args: str
    reply: str


def unknown_process(sup: Supervisor, request_id: int, name: object) -> ControlReply:
    known = ", ".join(proc.name for proc in sup.managed())
    return ControlReply(request_id, False, "unknown_process", f"no process named {name!r}; known: {known}")


def status(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    return ControlReply(request.request_id, True, data=status_data(sup, now))


def stop(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    sup.stop(now, by=str(request.args.get("by", "tandem stop")))
    if sup.processes and not sup.managed():
        return ControlReply(
            request.request_id,
            True,
            message="stopping the supervisor; the daemons it did not start "
            "keep running: stop them where they run (systemctl stop, tandem-tmux stop)",
        )
    return ControlReply(request.request_id, True, message="stopping every daemon")


def restart(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    rid, name = request.request_id, request.args.get("name")
    proc = sup.processes.get(name)
    if proc is not None and not proc.managed:
        return ControlReply(
            rid,
            False,
            "not_managed",
            f"{name} was not started by this supervisor; restart it "
            "where it runs (e.g. systemctl restart tandem-actor@N)",
        )
    if proc is None:
        return unknown_process(sup, rid, name)
    was_alive = states.is_alive(proc.record)
    states.restart_requested(proc.record, now)
    if was_alive:
        proc.signal(signal.SIGTERM)
    return ControlReply(rid, True, message=f"restarting {name}")


def register(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    return sup.register(request, now)


def lookup(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    policy, actor = request.args.get("policy", ""), request.args.get("actor")
    entry = sup.registry.get(str(policy))
    if entry is None:
        return ControlReply(
            request.request_id, False, "not_registered", f"no learner registered for policy {policy!r} yet"
        )
    endpoints, learner = dict(entry.endpoints), entry.name
    if isinstance(actor, int) and actor >= 0 and sup.replicas.replicated(str(policy)):
        # data-parallel replicas: the actor's transitions go to its own replica, the weights come from replica 0
        feeding = sup.replicas.feeding(str(policy), actor)
        if feeding is None:
            return ControlReply(
                request.request_id,
                False,
                "not_registered",
                f"the replica of policy {policy!r} that actor {actor} feeds has not registered yet",
            )
        endpoints["transitions"], learner = feeding.endpoints["transitions"], feeding.name
        feeders = sup.replicas.feeders(str(policy), feeding, sup.config.actors.count)
    else:
        feeders = None
    data = {"endpoints": endpoints, "learner": learner, "public_key": entry.public_key}
    if feeders:
        data["feeders"] = feeders
    return ControlReply(request.request_id, True, data=data)


def rendezvous(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    ok, error, data = sup.replicas.rendezvous(dict(request.args), now)
    return ControlReply(request.request_id, ok, "" if ok else "bad_args", error, data=data)


def start_token(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    name = request.args.get("name")
    if not isinstance(name, str) or not name:
        return ControlReply(request.request_id, False, "bad_args", "start_token needs name: the asking daemon's name")
    proc = sup.processes.get(name)
    if (proc is None or not proc.managed) and not sup.adopt:
        # A slot held by a name that never heartbeats here would never be given back.
        return unknown_process(sup, request.request_id, name)
    granted = sup.tokens.acquire(name)
    return ControlReply(request.request_id, True, data={"granted": granted, "holders": sorted(sup.tokens.holders)})


def episodes(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    args = request.args
    agents = args.get("agents")
    returns = args.get("returns", [])
    sup.view.episodes_report(
        list(returns) if isinstance(returns, list) else [], now, list(agents) if isinstance(agents, list) else None
    )
    return ControlReply(request.request_id, True, data={})


def progress(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    return ControlReply(request.request_id, True, data={"figures": sup.view.figures(now)})


COMMANDS: dict[str, Command] = {
    "status": Command(
        status,
        "tandem status",
        "none",
        "{run, supervisor_pid, time, stopping, processes: [row...], policies: [line...], unhealthy: [name...]}",
    ),
    "stop": Command(
        stop,
        "tandem stop",
        "by: str (optional, who asked; shown as the run's end reason)",
        "none; message says what stops",
    ),
    "restart": Command(
        restart, "tandem restart", "name: str (a process the supervisor started)", "none; message 'restarting NAME'"
    ),
    "register": Command(
        register,
        "learners, every 5 s",
        "name, role, policy, host: str; pid: int; insecure: bool; endpoints: {transitions, weights, snapshot: str}",
        "none",
    ),
    "lookup": Command(
        lookup,
        "actors and the evaluator, before they connect",
        "policy: str; actor: int (optional: an actor's index, which picks its replica of a replicated policy)",
        "{endpoints: {transitions, weights, snapshot}, learner: str}",
    ),
    "rendezvous": Command(
        rendezvous,
        "learner replicas (learner.replicas > 1), at their start",
        "policy: str; rank: int; world_size: int; master: 'host:port' (rank 0 only: where its store listens)",
        "{master: 'host:port' ('' while replica 0 has posted none since the group was last lost), generation: int}",
    ),
    "start_token": Command(
        start_token,
        "actors, before they build envs",
        "name: str (the asking daemon)",
        "{granted: bool, holders: [name...]}",
    ),
    "episodes": Command(
        episodes,
        "actors, with their heartbeats",
        "returns: [float], lengths: [int], version: int, agents: [str] (multi-agent runs)",
        "{}",
    ),
    "progress": Command(progress, "scripts and tests", "none", "{figures: the figures `tandem up` shows}"),
}


def handle(sup: Supervisor, request: ControlRequest, now: float) -> ControlReply:
    """Answer one control request through the table; an unknown command is answered with the known ones."""
    command = COMMANDS.get(request.command)
    if command is None:
        return ControlReply(
            request.request_id,
            False,
            "unknown_command",
            f"unknown command {request.command!r}; known: {', '.join(COMMANDS)}",
        )
    return command.handler(sup, request, now)
