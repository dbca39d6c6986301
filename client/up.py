"""`tandem up CONFIG`: start a learner, N actors and an evaluator on this machine, show progress, stop cleanly."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from dataclasses import replace

import click

from client.config_cmd import load_or_exit, set_option
from client.exit_codes import ExitCode
from client.progress import RunView, format_line
from daemons.supervisor.status import state_summary
from daemons.supervisor.supervisor import ChildSpec, Supervisor
from daemons.config import RunConfig, render_toml
from daemons.config.policies import PORT_KEYS, policy_config, policy_names, port_table
from daemons.endpoints import is_loopback
from daemons.paths import run_dir
from daemons.runtime import StopFlag, log_dropped
from daemons.sd_notify import shared
from protocol import ControlReply, ControlRequest, Heartbeat, ProtocolError, TransportError, decode, sockets

log = logging.getLogger(__name__)
DISPLAY_INTERVAL_S = 0.5
PLAIN_INTERVAL_S = 5.0
NOTIFY_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")  # systemd's, for the supervisor alone


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
        return replace(config, transport=fixed(t, ("transitions_port", "weights_port", "snapshot_port", "control_port")))
    policies = {name: fixed(section, PORT_KEYS) for name, section in config.policies.items()}
    return replace(config, transport=fixed(t, ("control_port",)), policies=policies)


def plan_children(config: RunConfig, insecure: bool = False) -> list[ChildSpec]:
    """The learners (one per policy), the actors and the evaluator of a one-machine run: the process table."""
    specs = []
    for policy in policy_names(config):
        if not policy_config(config, policy).learner.remote:
            args = ("--policy", policy, *(("--insecure",) if insecure else ()))
            specs.append(ChildSpec(f"learner-{policy}", "learner", args))
    specs += [ChildSpec(f"actor-{i}", "actor", ("--index", str(i))) for i in range(config.actors.count)]
    if config.eval.enabled:
        specs.append(ChildSpec("evaluator", "evaluator"))
    return specs


insecure_option = click.option("--insecure", is_flag=True,
                               help="Allow binding a non-loopback transport.host without authentication.")


class Display:
    """A live table on a terminal; a plain line every few seconds otherwise (CI, pipes, log files)."""

    def __init__(self, quiet: bool, as_json: bool):
        self.quiet, self.as_json = quiet, as_json
        self.tty = sys.stdout.isatty() and not as_json
        self.next_plain = 0.0
        self.live = None
        if self.tty and not quiet:
            from rich.live import Live

            self.live = Live(auto_refresh=False, transient=False)
            self.live.start()

    def show(self, figures: dict, now: float, force: bool = False) -> None:
        if self.quiet:
            return
        if self.live is not None:
            from rich.table import Table

            table = Table(show_header=True, header_style="bold", box=None)
            for key in figures:
                table.add_column(key.replace("_", " "))
            table.add_row(*("-" if v is None else str(v) for v in figures.values()))
            self.live.update(table, refresh=True)
        elif force or now >= self.next_plain:
            self.next_plain = now + PLAIN_INTERVAL_S
            click.echo(json.dumps(figures) if self.as_json else format_line(figures))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()


def handle_control(router, sup: Supervisor, view: RunView, now: float) -> None:
    """Heartbeats and requests from daemons and the CLI; every request gets a reply, bad messages are dropped."""
    def episodes(args) -> dict:
        agents = args.get("agents")
        view.episodes_report(list(args.get("returns", [])), now, list(agents) if isinstance(agents, list) else None)
        return {}

    extra = {"episodes": episodes,
             "progress": lambda args: {"figures": view.figures(now)}}
    while (frames := sockets.recv_frames(router, 0)) is not None:
        identity, body = bytes(frames[0]), frames[1:]
        try:
            message = decode(body)
        except ProtocolError as exc:
            view.malformed += 1
            log_dropped(log, "a malformed control message", view.malformed, exc)
            sockets.send_message(router, ControlReply(0, False, "bad_message", str(exc)), identity=identity)
            continue
        if isinstance(message, Heartbeat):
            sup.heartbeat(message, now)
            if message.name in sup.beats:
                view.heartbeat(message, now)
        elif isinstance(message, ControlRequest):
            sockets.send_message(router, sup.handle(message, now, extra), identity=identity)


def supervise(config_file: str, overrides: tuple[str, ...], display: Display | None, honour_stop: bool,
              insecure: bool = False, no_children: bool = False) -> None:
    """Start and keep the run's daemons alive until a stop condition, `tandem stop`, a FATAL, or a signal.

    With `no_children` it starts nothing: daemons started elsewhere (systemd units, tmux windows) connect
    with --control, and it hands out start tokens, keeps the learner registry and watches heartbeats.
    """
    notifier = shared()  # made now, before its variables leave the environment
    for key in NOTIFY_ENV:  # as sd_notify(unset_environment=1): children must not speak for this unit
        os.environ.pop(key, None)
    config = load_or_exit(config_file, overrides)
    if no_children:  # learners started elsewhere bind what their own config says and register it here
        t = config.transport
        config = replace(config, transport=replace(t, control_port=t.control_port or free_port(t.host)))
    else:
        config = fix_ports(config)
    if not insecure and not is_loopback(f"tcp://{config.transport.host}:0"):
        click.echo(f"error: transport.host {config.transport.host!r} is not loopback: authentication (CurveZMQ) is not "
                   "built yet, so binding there needs --insecure", err=True)
        sys.exit(int(ExitCode.USAGE))
    directory = run_dir(config)
    directory.mkdir(parents=True, exist_ok=True)
    resolved = directory / "config.toml"
    resolved.write_text(render_toml(config))
    started = time.monotonic()
    ctx = sockets.new_context()
    try:
        router = sockets.control_router(ctx, f"tcp://{config.transport.host}:{config.transport.control_port}")
    except TransportError as exc:
        sockets.close_context(ctx, 0)
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(ExitCode.FAILURE))
    control = sockets.bound_endpoint(router)
    endpoint_file = directory / "endpoint"
    endpoint_file.write_text(control + "\n")
    specs = [] if no_children else plan_children(config, insecure)
    sup = Supervisor(config, resolved, control, directory / "logs", specs, adopt=no_children)
    view = RunView(config.stop, started)
    stop = StopFlag().install()
    code, reason = ExitCode.OK, ""
    try:
        sup.start_all(started)
        notifier.ready(state_summary(sup, started))
        next_display = 0.0
        while True:
            now = time.monotonic()
            handle_control(router, sup, view, now)
            sup.step(now)
            if now >= notifier.next_due:  # from this loop only: a hung supervisor stops feeding the watchdog
                notifier.tick(now, state_summary(sup, now))
            if stop:
                code, reason = ExitCode.INTERRUPTED, f"stopped by {stop.signal_name}"
                break
            if sup.stopping:
                code, reason = ExitCode.OK, f"stopped by {sup.stop_requested_by}"
                break
            if (why := sup.fatal_reason()) is not None:
                code, reason = ExitCode.FAILURE, why
                break
            if honour_stop and (why := view.stop_reason(now)) is not None:
                code, reason = ExitCode.OK, why
                break
            if display is not None and now >= next_display:
                display.show(view.figures(now), now)
                next_display = now + DISPLAY_INTERVAL_S
            sockets.poll([router], 50)
    finally:
        notifier.stopping(f"stopping: {reason or 'on error'}")
        if display is not None:
            display.close()
        sup.shutdown(timeout_s=5.0)
        sockets.close_context(ctx, linger_ms=0)
        endpoint_file.unlink(missing_ok=True)
    figures = view.figures(time.monotonic())
    summary = {"result": "ok" if code == ExitCode.OK else "stopped", "reason": reason, "run_dir": str(directory), **figures}
    as_json = display is not None and display.as_json
    click.echo(json.dumps(summary) if as_json else f"{format_line(figures)}\n{summary['result']}: {reason}")
    sys.exit(int(code))


@click.command("up")
@click.argument("config_file", type=click.Path(dir_okay=False))
@set_option
@click.option("--quiet", is_flag=True, help="No progress output, only the final summary.")
@click.option("--json", "as_json", is_flag=True, help="Progress and summary as JSON lines.")
@insecure_option
def up_cmd(config_file: str, overrides: tuple[str, ...], quiet: bool, as_json: bool, insecure: bool) -> None:
    """Train CONFIG_FILE on this machine until a stop condition, `tandem stop`, Ctrl-C or SIGTERM.

    Daemons that crash or hang are restarted with backoff; `tandem status` shows every process.
    """
    supervise(config_file, overrides, Display(quiet, as_json), honour_stop=True, insecure=insecure)


@click.command("supervise")
@click.argument("config_file", type=click.Path(dir_okay=False))
@set_option
@insecure_option
@click.option("--no-children", is_flag=True,
              help="Start no daemons: watch those started elsewhere (systemd, tmux) that connect with --control.")
def supervise_cmd(config_file: str, overrides: tuple[str, ...], insecure: bool, no_children: bool) -> None:
    """Run the supervisor of CONFIG_FILE without progress output (for a head machine or systemd).

    It ignores [stop] conditions: it runs until `tandem stop`, SIGTERM or a FATAL learner. With
    --no-children it keeps the control endpoint, start tokens, learner registry and heartbeat watch, and a
    daemon that goes silent shows as REMOTE-LOST: whatever started it (systemd) restarts it.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s supervisor %(levelname)s: %(message)s")
    supervise(config_file, overrides, None, honour_stop=False, insecure=insecure, no_children=no_children)
