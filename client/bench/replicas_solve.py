"""A replica group trained to solved across hosts: each replica and its actors in a network namespace of its own,
started by hand as on machines of their own, the supervisor and evaluator on the head."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from pathlib import Path

import click

from tandem.client.harness import end_group, read_or_empty, rows, start_session
from tandem.client.netns import Hosts, NetnsError
from tandem.daemons.config import load_config
from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.protocol import sockets

POLL_S = 1.0  # status is asked for once a second
START_S = 60.0  # the supervisor writes its endpoint within this
REPLY_S = 5.0
CHECK_EVERY = 5  # the replicas compare their weights bit for bit every this many updates (--set overrides it)


def tandem(*args: str) -> list[str]:
    return [sys.executable, "-m", "tandem", *args]


def replica_command(hosts: Hosts, rank: int, config_file: str, endpoint: str) -> list[str]:
    """Replica `rank` started by hand in its host's namespace (`tandem learner --rank R`), as on a machine of its
    own: it joins the supervisor at `endpoint` and binds its host's address."""
    address = hosts.places[rank][1]
    joined = ("--join", endpoint, "--bind", f"tcp://{address}:*", "--insecure", "--rank", str(rank))
    return [*hosts.wrap(rank), *tandem("learner", config_file, *joined)]


def spread(actors: int, replicas: int) -> list[list[int]]:
    """The actors each host runs: actor i feeds replica i mod N (the supervisor's mapping), so it runs on its host."""
    return [[a for a in range(actors) if a % replicas == r] for r in range(replicas)]


def eval_return(status: dict | None) -> float | None:
    """The policy's latest evaluation return in a status answer (None before any, or before its learner registers)."""
    policies = (status or {}).get("policies") or [{}]
    return policies[0].get("eval_return")


class SpreadRun:
    """The head (`tandem supervise --no-children`, the evaluator) and, on host r, replica r and its actors."""

    def __init__(self, config: Path, replicas: int, actors: int, overrides: tuple[str, ...], hosts: Hosts, tmp: Path):
        self.tmp, self.procs, self.names = tmp, [], []
        self.run_dir = tmp / "run"
        self.ctx, self.channel = sockets.new_context(), None
        try:
            self.start_all(config, replicas, actors, overrides, hosts)
        except BaseException:  # a failed start (or Ctrl-C) leaves nothing running: each is a session of its own
            self.close()
            raise

    def start_all(self, config: Path, replicas: int, actors: int, overrides: tuple[str, ...], hosts: Hosts) -> None:
        settings = [
            f"run.dir='{self.run_dir}'",
            f"learner.replicas={replicas}",
            f"actors.count={actors}",
            "learner.remote=true",
            "learner.replicas_trusted_network=true",
            f"transport.host='{hosts.head}'",
            f"learner.replica_check_every={CHECK_EVERY}",
            *overrides,
        ]
        sets = [arg for s in settings for arg in ("--set", s)]
        self.start("head", tandem("supervise", str(config), "--no-children", "--insecure", *sets))
        deadline = time.monotonic() + START_S
        while not (endpoint := read_or_empty(self.run_dir / "endpoint")):
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise click.ClickException(f"the head never wrote its endpoint: {self.output('head')[-1500:]}")
            time.sleep(0.1)
        written = str(self.run_dir / "config.toml")
        self.channel = ControlChannel(self.ctx, endpoint)
        for rank in range(replicas):
            self.start(f"learner-{rank}", replica_command(hosts, rank, written, endpoint))
        # Every replica registered before any actor starts (the supervisor would hold each actor's lookup until its
        # own replica registers anyway): a learner that fails to start is named here, before the timed run.
        self.wait_registered(replicas)
        for rank in range(replicas):
            for actor in spread(actors, replicas)[rank]:
                command = tandem("actor", written, "--index", str(actor), "--control", endpoint)
                self.start(f"actor-{actor}", [*hosts.wrap(rank), *command])
        self.start("evaluator", tandem("evaluator", written, "--control", endpoint))

    def wait_registered(self, replicas: int) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if (gone := self.ended()) is not None:
                raise click.ClickException(f"{gone} exited while starting: {self.output(gone)[-1500:]}")
            registered = [p for p in (self.ask("status", {}) or {}).get("policies", []) if p.get("learner")]
            if len(registered) >= replicas:  # replica 0's row and one `POLICY@R` row for each of the others
                return
            time.sleep(0.2)
        raise click.ClickException(f"the {replicas} replicas did not all register within {START_S:g} s")

    def start(self, name: str, command: list[str]) -> None:
        with open(self.tmp / f"{name}.out", "ab") as out:
            self.procs.append(start_session(command, out, self.tmp))
        self.names.append(name)

    def ended(self) -> str | None:
        """The name of a process that has exited (none should before the bench stops them), or None."""
        return next((name for name, proc in zip(self.names, self.procs) if proc.poll() is not None), None)

    def output(self, name: str) -> str:
        return read_or_empty(self.tmp / f"{name}.out")

    def ask(self, kind: str, args: dict) -> dict | None:
        """The data of an ok answer from the head, or None (no answer within REPLY_S, or a refusal)."""
        try:
            reply = self.channel.request(kind, args, timeout_s=REPLY_S)
        except ControlTimeout:
            return None
        return reply.data if reply.ok else None

    def close(self) -> None:
        for proc in reversed(self.procs):  # the head last: the others leave while it still answers
            end_group(proc, 15.0)
        if self.channel is not None:
            self.channel.close()
        self.ctx.term()


def solve_on_hosts(config: Path, replicas: int, actors: int, timeout_s: float, overrides: tuple[str, ...]) -> dict:
    """Train `config` to its stop.eval_return with `replicas` replicas, each with its actors on a host of its
    own: the time and env steps to it, and what the group checked (weights compared, mismatches)."""
    target = load_config(config, list(overrides)).stop.eval_return
    if target is None:
        raise click.ClickException(f"{config.name} sets no stop.eval_return: --solve has no target to train to")
    names = ["learner-default", *(f"learner-default@{r}" for r in range(1, replicas))]
    with tempfile.TemporaryDirectory(prefix="tandem-bench-solve-") as tmp, contextlib.ExitStack() as stack:
        try:
            hosts = stack.enter_context(Hosts(replicas))
        except NetnsError as exc:
            raise click.ClickException(f"--solve: {exc}") from exc
        addresses = [address for _, address in hosts.places]
        run = SpreadRun(config.resolve(), replicas, actors, overrides, hosts, Path(tmp))  # run from `tmp`
        stack.callback(run.close)
        started, data, solved_s = time.monotonic(), None, None
        while time.monotonic() - started < timeout_s:
            time.sleep(POLL_S)
            if (gone := run.ended()) is not None:
                raise click.ClickException(f"{gone} exited during the run: {run.output(gone)[-1500:]}")
            data = run.ask("status", {}) or data
            value = eval_return(data)
            if value is not None and value >= target:
                solved_s = time.monotonic() - started
                break
        if data is None:
            raise click.ClickException(f"the head never answered status: {run.output('head')[-1500:]}")
        found = rows(data)
        counters = {name: found.get(name, {}).get("counters", {}) for name in names}
        lookups = [
            (run.ask("lookup", {"policy": "default", "actor": a}) or {}).get("endpoints", {}) for a in range(actors)
        ]
    return {
        "replicas": replicas,
        "actors": actors,
        "target": target,
        "solved": solved_s is not None,
        "seconds": round(solved_s if solved_s is not None else timeout_s, 1),
        "eval_return": eval_return(data),
        "env_steps": sum(
            int(r.get("counters", {}).get("env_steps", 0)) for n, r in found.items() if n.startswith("actor-")
        ),
        "updates": [c.get("updates", 0) for c in counters.values()],
        "weight_checks": [c.get("replica_checks", 0) for c in counters.values()],
        "weight_mismatches": sum(c.get("replica_mismatches", 0) for c in counters.values()),
        "batches_received": [c.get("batches_received", 0) for c in counters.values()],
        "generations": sorted({c.get("replica_generation") for c in counters.values()}, key=str),
        # each actor's transitions go to the replica on its own host (the address of that host's namespace)
        "actors_feed": [e.get("transitions", "") for e in lookups],
        "hosts": addresses,
    }
