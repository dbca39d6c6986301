"""`tandem up` and `tandem supervise`: the command lines around the supervisor loop (daemons/supervisor/loop.py)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable

import click

from tandem.client.config_cmd import NOT_PROBED, load_or_exit, read_or_exit, refuse, set_option
from tandem.client.display import Display, format_line
from tandem.client.up_check import Refused
from tandem.daemons.config import RunConfig
from tandem.daemons.runtime.exit_codes import ExitCode

insecure_option = click.option(
    "--insecure", is_flag=True, help="Allow binding a non-loopback transport.host without authentication."
)


def run_supervisor(
    config_file: str,
    overrides: tuple[str, ...],
    display: Display | None,
    honour_stop: bool,
    insecure: bool = False,
    no_children: bool = False,
    fresh: bool = False,
    check: bool = False,
) -> None:
    """Load the config, run the supervisor loop, print how it ended and exit with its code. With `check`, what
    `tandem config check` finds refuses the start (exit 3) before any daemon starts."""
    from tandem.daemons.settings.plugins import plugin_folders
    from tandem.daemons.supervisor.loop import SupervisorError, supervise

    config, preflight = checked_config(config_file, overrides, check)
    if display is not None:
        display.stop = config.stop
        if not display.quiet:  # what comes next takes seconds: say what it is first (on stderr: --json's is stdout)
            click.echo(starting_line(config, check), err=True)
    try:
        try:
            outcome = supervise(
                config,
                honour_stop,
                insecure=insecure,
                no_children=no_children,
                show=display.show if display is not None else None,
                fresh=fresh,
                announce=lambda line: click.echo(line, err=True),
                plugin_paths=plugin_folders(config_file),
                preflight=preflight,
            )
        finally:
            if display is not None:
                display.close()
    except Refused as exc:
        refuse(config_file, exc.lines)
    except KeyboardInterrupt:  # before the supervisor's own signal handling: checking, or setting up
        click.echo("stopped by SIGINT before any daemon started", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except SupervisorError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(exc.code))
    figures = outcome.figures
    result = "ok" if outcome.code == 0 else "stopped"
    summary = {"result": result, "reason": outcome.reason, "run_dir": str(outcome.run_dir), **figures}
    as_json = display is not None and display.as_json
    click.echo(json.dumps(summary) if as_json else f"{format_line(figures)}\n{result}: {outcome.reason}")
    sys.exit(int(outcome.code))


def checked_config(config_file: str, overrides: tuple[str, ...], check: bool) -> tuple[RunConfig, Callable | None]:
    """The config, or an exit naming every mistake, as `config check` does (probing here only when the loader
    found some: the run ends anyway); with `check`, the probe of a clean config, for `supervise` to run."""
    if not check:
        return load_or_exit(config_file, overrides), None
    from tandem.client.preflight import findings, probe
    from tandem.client.up_check import preflight

    config, problems, order = read_or_exit(config_file, overrides)
    if problems:
        found = findings(config, problems, order, lambda c: probe(c, config_file, c.supervisor.build_env_deadline_s))
        refuse(config_file, found.problems, NOT_PROBED if found.blocked else "")
    return config, lambda: preflight(config_file, overrides, config, order)


def starting_line(config: RunConfig, check: bool) -> str:
    """What `tandem up` is about to start, said before the seconds of checking and importing that follow."""
    from tandem.daemons.runtime.paths import run_dir
    from tandem.daemons.settings.agents import policy_names

    actors = config.actors.count
    learners = len(policy_names(config))
    parts = [f"{actors} actor{'' if actors == 1 else 's'}", f"{learners} learner{'' if learners == 1 else 's'}"]
    if config.eval.enabled:
        parts.append("an evaluator")
    first = "checking the env and networks, then starting the daemons" if check else "starting the daemons"
    return (
        f"tandem up: run {config.run.name!r} in {run_dir(config)}, env {config.env.id!r}: {', '.join(parts)}; {first}"
    )


@click.command("up")
@click.argument("config_file", type=click.Path(dir_okay=False))
@set_option
@click.option("--quiet", is_flag=True, help="No progress output, only the final summary.")
@click.option("--json", "as_json", is_flag=True, help="Progress and summary as JSON lines.")
@insecure_option
@click.option(
    "--fresh",
    is_flag=True,
    help="Start over: move the run directory's earlier checkpoints and curves under previous/ instead of resuming.",
)
@click.option(
    "--serial",
    is_flag=True,
    help="One process, no daemons: step the envs, train and evaluate in turn, deterministic for run.seed "
    "(for a debugger, or the serial twin of an async run).",
)
@click.option(
    "--no-probe",
    is_flag=True,
    help="Start without first building an env and the networks here as `tandem config check` does (the file is "
    "still checked; each daemon meets a mistake of its own later, as on another machine).",
)
@click.option(
    "--eval-every",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="(--serial) Env steps between two evaluation rounds and metrics records.",
)
def up_cmd(
    config_file: str,
    overrides: tuple[str, ...],
    quiet: bool,
    as_json: bool,
    insecure: bool,
    fresh: bool,
    serial: bool,
    no_probe: bool,
    eval_every: int,
) -> None:
    """Train CONFIG_FILE on this machine until a stop condition, `tandem stop`, Ctrl-C or SIGTERM.

    It first checks the config as `tandem config check` does and refuses, with the same lines and exit code 3,
    a config with a mistake. A run directory with checkpoints is resumed (and says so); --fresh starts over.
    Daemons that crash or hang are restarted with backoff; `tandem status` shows every process. --serial runs
    it all in this process instead, in turn (see the guide Your own algorithm).
    """
    if serial:
        from tandem.client.serial_up import run_serial_up

        run_serial_up(config_file, overrides, quiet, as_json, eval_every, fresh)
        return
    run_supervisor(
        config_file,
        overrides,
        Display(quiet, as_json),
        honour_stop=True,
        insecure=insecure,
        fresh=fresh,
        check=not no_probe,
    )


@click.command("supervise")
@click.argument("config_file", type=click.Path(dir_okay=False))
@set_option
@insecure_option
@click.option(
    "--no-children",
    is_flag=True,
    help="Start no daemons: watch those started elsewhere (systemd, tmux) that connect with --control.",
)
def supervise_cmd(config_file: str, overrides: tuple[str, ...], insecure: bool, no_children: bool) -> None:
    """Run the supervisor of CONFIG_FILE without progress output (for a head machine or systemd).

    It ignores [stop] conditions: it runs until `tandem stop`, SIGTERM or a FATAL learner. With
    --no-children it keeps the control endpoint, start tokens, learner registry and heartbeat watch, and a
    daemon that goes silent shows as REMOTE-LOST: whatever started it (systemd) restarts it.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s supervisor %(levelname)s: %(message)s")
    run_supervisor(config_file, overrides, None, honour_stop=False, insecure=insecure, no_children=no_children)
