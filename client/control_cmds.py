"""`tandem status`, `stop` and `restart NAME`: ask the supervisor, with a timeout, and say what to check."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from tandem.client.run_endpoint import endpoint_files, find_endpoint
from tandem.client.screen import NARROW_BELOW, fmt, narrow_status_rows, short, whole
from tandem.client.status_lines import (
    evaluator_lines,
    game_server_lines,
    learner_time_lines,
    replica_group_lines,
    selfplay_lines,
)
from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.protocol import TransportError, socket_monitor, sockets


def cli_keys(endpoint: str, run_dir: str | None) -> Any:
    """CurveZMQ keys for a control link: from the environment, or the config of the run that wrote `endpoint`."""
    from tandem.daemons.config import load_config
    from tandem.daemons.security.curve import cli_curve_keys

    directory = Path(run_dir) if run_dir else None
    if directory is None:  # the newest run here whose endpoint file names this endpoint
        for path in endpoint_files():
            try:
                if Path(path).read_text().strip() == endpoint:
                    directory = Path(path).parent
                    break
            except OSError:
                continue
    has_config = directory is not None and (directory / "config.toml").exists()
    return cli_curve_keys(load_config(directory / "config.toml") if has_config else None)


def pace_budget(p: dict) -> str:
    """A learner's advertised pace: a rate (transitions/s), a credit (transitions per version) or none."""
    if p.get("pace_per_s"):
        return f"{p['pace_per_s']:.0f}/s"
    return f"{p['pace_credit']:.0f}/version" if p.get("pace_credit") else "none"


def ask(endpoint: str, command: str, args: dict | None, timeout_s: float, run_dir: str | None = None) -> Any:
    """One request/reply; unreachable or refused -> a message saying what to check, and a non-zero exit."""
    ctx = sockets.new_context()
    watch = None
    try:
        keys = cli_keys(endpoint, run_dir)
        channel = ControlChannel(ctx, endpoint, sockets.SocketOptions(curve=keys))
        if keys is not None:  # a refused key looks like silence unless the handshake is watched
            watch = socket_monitor.watch_handshake_failures(channel.socket)
        reply = channel.request(command, args, timeout_s=timeout_s)
    except ControlTimeout:
        why = socket_monitor.handshake_failure(watch) if watch is not None else ""
        if why:
            click.echo(
                f"error: the supervisor at {endpoint} refused this client's CurveZMQ handshake ({why}). "
                "Its allow list must hold this client's public key: on the supervisor's machine run "
                "`tandem keys allow 'PUBLIC_KEY' --name NAME` (`tandem keys show` here prints it), "
                "then `kill -HUP` the supervisor.",
                err=True,
            )
        else:
            click.echo(
                f"error: the supervisor at {endpoint} did not answer {command!r} within {timeout_s:g} s. "
                "Check that `tandem up` (or `tandem supervise`) is running, that the endpoint is right "
                "(runs/<name>/endpoint) and that the port is reachable from here"
                + (" (with CurveZMQ, also that it allows this client's key)." if keys is not None else "."),
                err=True,
            )
        sys.exit(int(ExitCode.UNREACHABLE))
    except (TransportError, ValueError) as exc:  # ValueError: a key that cannot be used (KeySetupError)
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(ExitCode.UNREACHABLE))
    finally:
        if watch is not None:
            watch.close(linger=0)
        sockets.close_context(ctx, linger_ms=0)
    if not reply.ok:
        click.echo(f"error: {reply.code}: {reply.message}", err=True)
        sys.exit(int(ExitCode.FAILURE))
    return reply


endpoint_option = click.option(
    "--endpoint", default=None, metavar="ENDPOINT", help="Supervisor control endpoint (tcp://HOST:PORT)."
)
run_dir_option = click.option(
    "--run-dir", default=None, type=click.Path(file_okay=False), help="Run directory holding the endpoint file."
)
timeout_option = click.option(
    "--timeout", "timeout_s", default=5.0, show_default=True, help="Seconds to wait for an answer."
)


def render(data: dict, width: int = 220) -> Any:
    """The status screen; below NARROW_BELOW columns a narrow table whose cells are never cut."""
    from rich.console import Group
    from rich.table import Table

    if width < NARROW_BELOW:
        return render_narrow(data)

    table = Table(
        title=f"run {data['run']}" + (" (stopping)" if data.get("stopping") else ""), box=None, header_style="bold"
    )
    columns = [
        "name",
        "role",
        "host",
        "pid",
        "state",
        "stage",
        "in stage",
        "uptime",
        "restarts",
        "beat age",
        "rss",
        "cpu",
        "rate",
        "version",
        "lag",
        "dropped",
        "last error",
    ]
    for col in columns:
        table.add_column(col, overflow="fold")
    for r in data["processes"]:
        state = r["state"] + (" HUNG" if r["hung"] else "")
        rate = (
            f"{fmt(r['rate_per_s'])} {'upd' if r['rate_of'] == 'updates' else 'steps'}/s"
            if r["rate_per_s"] is not None
            else "-"
        )
        table.add_row(
            r["name"],
            r["role"],
            r["host"],
            fmt(r["pid"]),
            state,
            fmt(r["stage"]),
            fmt(r["stage_s"], "s"),
            fmt(r["uptime_s"], "s"),
            restarts_cell(r),
            fmt(r["heartbeat_age_s"], "s"),
            fmt(r["rss_mb"], "M"),
            fmt(r["cpu_percent"], "%"),
            rate,
            fmt(r["version"]),
            fmt(r["lag"]),
            fmt(r["dropped"]),
            short_error(r["last_error"]),
        )
    policies = Table(box=None, header_style="bold")
    for col in (
        "policy",
        "state",
        "link",
        "version",
        "updates/s",
        "replay fill",
        "lag",
        "dropped (learner/actors)",
        "pace (budget, waited)",
        "eval return",
        "last checkpoint",
    ):
        policies.add_column(col)
    for p in data["policies"]:
        fill = f"{100 * p['replay_fill']:.0f}%" if p["replay_fill"] is not None else "-"
        age = p["last_checkpoint_age_s"]
        dropped = f"{fmt(p.get('dropped_by_learner'))}/{fmt(p.get('dropped_by_actors'))}"
        pace = f"{pace_budget(p)}, {fmt(p.get('paced_s'), 's')}"
        learner = str(p.get("learner") or "")
        policies.add_row(
            # a data-parallel replica is named by its learner (default@1); replica 0 by its policy, as a lone learner
            learner.removeprefix("learner-") if "@" in learner else p["policy"],
            p["state"],
            link_cell(p.get("link")),
            fmt(p["version"]),
            fmt(p["updates_per_s"]),
            fill,
            fmt(p["lag"]),
            dropped,
            pace,
            fmt(p.get("eval_return")),
            f"{age:.0f}s ago" if age is not None and age >= 0 else "none yet",
        )
    # The table keeps a short form; the whole error (often the cause is at its end) gets a line of its own.
    errors = [f"{r['name']}: {r['last_error']}" for r in data["processes"] if len(r["last_error"] or "") > ERROR_CELL]
    control = f"control link: {link_cell(data.get('control_link'))}"
    return Group(
        table,
        policies,
        control,
        *evaluator_lines(data),
        *learner_time_lines(data),
        *replica_group_lines(data),
        *selfplay_lines(data),
        *game_server_lines(data),
        *(["", "last errors in full:", *errors] if errors else []),
    )


def link_cell(link: str | None) -> str:
    """CURVE, loopback or INSECURE (shouted: anyone who reaches those ports can feed or read the learner)."""
    return {"curve": "CURVE", "insecure": "INSECURE"}.get(link or "", link or "-")


def restarts_cell(row: dict) -> str:
    """Restarts, with the planned ones (recycles) among them shown apart: '5 (3 planned)'."""
    recycles = row.get("recycles") or 0
    return f"{row['restarts']} ({recycles} planned)" if recycles else fmt(row["restarts"])


def render_narrow(data: dict) -> Any:
    from rich.console import Group
    from rich.table import Table

    columns, rows = narrow_status_rows(data)
    table = Table(
        title=f"run {data['run']}" + (" (stopping)" if data.get("stopping") else ""),
        box=None,
        header_style="bold",
        pad_edge=False,
        collapse_padding=True,
        padding=(0, 1),
    )
    for col in columns:
        table.add_column(col, no_wrap=True, overflow="fold")
    for row in rows:
        table.add_row(*row)
    lines = []
    for p in data["policies"]:
        fill = f"{100 * p['replay_fill']:.0f}%" if p["replay_fill"] is not None else "-"
        lines.append(
            f"policy {p['policy']}: {p['state']}, {link_cell(p.get('link'))}, version {whole(p['version'])}, "
            f"{short(p['updates_per_s'])} updates/s, replay {fill}, lag {short(p['lag'])}, eval "
            f"{short(p.get('eval_return'))}, dropped {short(p.get('dropped_by_learner'))} by the learner "
            f"and {short(p.get('dropped_by_actors'))} by actors, pace "
            f"{pace_budget(p)} "
            f"(actors waited {short(p.get('paced_s'))} s)"
        )
    errors = [f"{r['name']}: {r['last_error']}" for r in data["processes"] if r["last_error"]]
    return Group(
        table,
        *lines,
        *evaluator_lines(data),
        *learner_time_lines(data),
        *replica_group_lines(data),
        *game_server_lines(data),
        *(["last errors:", *errors] if errors else []),
    )


ERROR_CELL = 60  # characters of a last error shown in the table


def short_error(error: str | None) -> str:
    error = error or ""
    return error if len(error) <= ERROR_CELL else error[: ERROR_CELL - 1] + "…"


run_dir_argument = click.argument("run_dir_arg", metavar="[RUN_DIR]", required=False, type=click.Path(file_okay=False))


def which_run_dir(run_dir_arg: str | None, run_dir: str | None) -> str | None:
    """RUN_DIR given as an argument (as `tandem plot`, `eval` and `export` take it) or with --run-dir; not both."""
    if run_dir_arg and run_dir and os.path.normpath(run_dir_arg) != os.path.normpath(run_dir):
        raise click.UsageError(f"two run directories: {run_dir_arg} and --run-dir {run_dir}; give one")
    return run_dir_arg or run_dir


@click.command("status")
@run_dir_argument
@endpoint_option
@run_dir_option
@timeout_option
@click.option("--json", "as_json", is_flag=True, help="Print the whole status as JSON.")
@click.option("--watch", is_flag=True, help="Refresh every second until Ctrl-C (which exits with 130).")
def status_cmd(run_dir_arg, endpoint, run_dir, timeout_s, as_json, watch) -> None:
    """What every process of a run is doing. Exit code 5 when any process is FATAL or hung.

    RUN_DIR (or --run-dir) is the run's directory; without it, the newest run under runs/ here."""
    run_dir = which_run_dir(run_dir_arg, run_dir)
    endpoint = find_endpoint(endpoint, run_dir)
    from rich.console import Console

    console = Console() if sys.stdout.isatty() else Console(width=220)
    try:
        while True:
            data = ask(endpoint, "status", None, timeout_s, run_dir).data
            if as_json:
                click.echo(json.dumps(data))
            else:
                if watch:
                    console.clear()
                console.print(render(data, console.width))
            if not watch:
                break
            time.sleep(1.0)
    except KeyboardInterrupt:  # how --watch ends: the exit code the docs give Ctrl-C, not click's "Aborted!"
        sys.exit(int(ExitCode.INTERRUPTED))
    if data["unhealthy"]:
        if not as_json:
            click.echo(unhealthy_line(data), err=True)
            for p in data["policies"]:
                if p["state"] in ("FATAL", "REMOTE-LOST"):
                    click.echo(f"policy {p['policy']} is down: {p['learner']} is {p['state']}", err=True)
        sys.exit(int(ExitCode.UNHEALTHY))


def unhealthy_line(data: dict) -> str:
    """`unhealthy: learner-default (disk full: ...), actor-1` from a status reply: each name with why, where said."""
    reasons = data.get("unhealthy_reasons") or {}  # a supervisor older than the field sends the names only
    return "unhealthy: " + ", ".join(f"{n} ({reasons[n]})" if reasons.get(n) else n for n in data["unhealthy"])


@click.command("stop")
@run_dir_argument
@endpoint_option
@run_dir_option
@timeout_option
def stop_cmd(run_dir_arg, endpoint, run_dir, timeout_s) -> None:
    """Stop a run: every daemon gets SIGTERM (SIGKILL after the grace), learners checkpoint.

    RUN_DIR (or --run-dir) is the run's directory; without it, the newest run under runs/ here."""
    run_dir = which_run_dir(run_dir_arg, run_dir)
    reply = ask(find_endpoint(endpoint, run_dir), "stop", {"by": "tandem stop"}, timeout_s, run_dir)
    click.echo(reply.message)


@click.command("restart")
@click.argument("name")
@endpoint_option
@run_dir_option
@timeout_option
def restart_cmd(name, endpoint, run_dir, timeout_s) -> None:
    """Restart one process by NAME (e.g. actor-3); also brings a FATAL one back."""
    reply = ask(find_endpoint(endpoint, run_dir), "restart", {"name": name}, timeout_s, run_dir)
    click.echo(reply.message)
