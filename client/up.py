"""`tandem up CONFIG`: start a learner, N actors and an evaluator on this machine, show progress, stop cleanly."""

from __future__ import annotations

import json
import logging
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from client.config_cmd import load_or_exit, set_option
from client.exit_codes import ExitCode
from client.progress import RunView, format_line
from daemons.children import Child, stop_all
from daemons.config import RunConfig, render_toml
from daemons.paths import run_dir
from daemons.runtime import StopFlag, log_dropped
from protocol import ControlReply, ControlRequest, Heartbeat, ProtocolError, TransportError, decode, sockets

log = logging.getLogger(__name__)
DISPLAY_INTERVAL_S = 0.5
PLAIN_INTERVAL_S = 5.0


def free_port(host: str) -> int:
    """A port that was free on `host` a moment ago (the daemon that binds it is started right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def fix_ports(config: RunConfig) -> RunConfig:
    """Replace every port of 0 with a free one, so restarted learners bind the same addresses."""
    t = config.transport
    taken = {t.transitions_port, t.weights_port, t.snapshot_port, t.control_port}
    chosen = {}
    for key in ("transitions_port", "weights_port", "snapshot_port", "control_port"):
        if getattr(t, key) == 0:
            port = free_port(t.host)
            while port in taken:
                port = free_port(t.host)
            taken.add(port)
            chosen[key] = port
    return replace(config, transport=replace(t, **chosen))


def plan_children(config: RunConfig, config_path: Path, control: str, logs: Path) -> list[Child]:
    """The learner, the actors and the evaluator of a one-machine run (the supervisor's process table)."""

    def child(name: str, role: str, *args: str) -> Child:
        argv = [role, str(config_path), *args, "--control", control, "--die-with-parent"]
        return Child(name, role, argv, logs / f"{name}.log")

    children = [child("learner-default", "learner", "--policy", "default")]
    children += [child(f"actor-{i}", "actor", "--index", str(i)) for i in range(config.actors.count)]
    if config.eval.enabled:
        children.append(child("evaluator", "evaluator"))
    return children


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


def handle_control(router, view: RunView, now: float) -> None:
    """Heartbeats and episode reports from daemons; every request gets a reply, bad messages are dropped."""
    while (frames := sockets.recv_frames(router, 0)) is not None:
        identity, body = bytes(frames[0]), frames[1:]
        try:
            message = decode(body)
        except ProtocolError as exc:
            view.malformed += 1
            log_dropped(log, "a malformed control message", view.malformed, exc)
            continue
        if isinstance(message, Heartbeat):
            view.heartbeat(message, now)
        elif isinstance(message, ControlRequest):
            if message.command == "episodes":
                view.episodes_report(list(message.args.get("returns", [])), now)
                reply = ControlReply(message.request_id, True)
            elif message.command == "status":
                reply = ControlReply(message.request_id, True, data={"figures": view.figures(now)})
            else:
                reply = ControlReply(message.request_id, False, "unknown_command", f"unknown command {message.command!r}")
            sockets.send_message(router, reply, identity=identity)


@click.command("up")
@click.argument("config_file", type=click.Path(dir_okay=False))
@set_option
@click.option("--quiet", is_flag=True, help="No progress output, only the final summary.")
@click.option("--json", "as_json", is_flag=True, help="Progress and summary as JSON lines.")
def up_cmd(config_file: str, overrides: tuple[str, ...], quiet: bool, as_json: bool) -> None:
    """Train CONFIG_FILE on this machine until a stop condition, Ctrl-C or SIGTERM."""
    config = fix_ports(load_or_exit(config_file, overrides))
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
    children = plan_children(config, resolved, control, directory / "logs")
    view = RunView(config.stop, started)
    stop = StopFlag().install()
    display = Display(quiet, as_json)
    code, reason = ExitCode.OK, ""
    # Restarts, the watchdog and `tandem status` belong to the supervisor issue: today a child that
    # exits ends the run with its exit code and the tail of its log.
    try:
        for child in children:
            child.start()
        next_display = 0.0
        while True:
            now = time.monotonic()
            handle_control(router, view, now)
            if stop:
                code, reason = ExitCode.INTERRUPTED, f"stopped by {stop.signal_name}"
                break
            if (why := view.stop_reason(now)) is not None:
                code, reason = ExitCode.OK, why
                break
            dead = [c for c in children if c.poll() is not None]
            if dead:
                c = dead[0]
                code = ExitCode.FAILURE
                reason = f"{c.name} exited with code {c.poll()}; its log {c.log_path} ends with:\n{c.log_tail()}"
                break
            if now >= next_display:
                display.show(view.figures(now), now)
                next_display = now + DISPLAY_INTERVAL_S
            sockets.poll([router], 50)
    finally:
        display.close()
        stop_all(children, config.supervisor.stop_grace_s)
        sockets.close_context(ctx, linger_ms=0)
    figures = view.figures(time.monotonic())
    summary = {"result": "ok" if code == ExitCode.OK else "stopped", "reason": reason, "run_dir": str(directory), **figures}
    click.echo(json.dumps(summary) if as_json else f"{format_line(figures)}\n{summary['result']}: {reason}")
    sys.exit(int(code))
