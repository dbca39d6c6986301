"""`tandem up CONFIG --serial`: the whole run in this process, in turn and deterministic (daemons/serial)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tandem.client.config_cmd import load_or_exit
from tandem.client.display import format_line


def run_serial_up(
    config_file: str, overrides: tuple[str, ...], quiet: bool, as_json: bool, eval_every: int, fresh: bool = False
) -> None:
    """Load the config, train it serially until a [stop] condition, print the summary, exit 0 (130 when SIGTERM or
    Ctrl-C ended it: a last checkpoint and record are written first).

    The run directory ends up as `tandem up` leaves one (config.toml, learner-default/ckpt-*.pt, metrics.jsonl),
    so `tandem plot`, `tandem eval` and `tandem export` take it; `fresh` moves an earlier run there aside."""
    from tandem.daemons.runtime.exit_codes import ExitCode
    from tandem.daemons.runtime.paths import run_dir
    from tandem.daemons.serial.loop import run_serial
    from tandem.daemons.settings.plugins import add_to_path, plugin_folders
    from tandem.daemons.settings.setup_errors import SetupError

    config = load_or_exit(config_file, overrides)
    plugin_paths = plugin_folders(config_file)
    add_to_path(plugin_paths)  # a plug-in beside the config, as the daemons find it

    def show(fig: dict[str, Any]) -> None:
        if not quiet:
            click.echo(json.dumps({"progress": fig}) if as_json else format_line(fig), err=not as_json)

    directory = run_dir(config)
    try:
        outcome = run_serial(
            config, eval_every, directory, show, fresh, plugin_paths, announce=lambda line: click.echo(line, err=True)
        )
    except SetupError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    result = "stopped" if outcome.interrupted else "ok"  # as `tandem up` ends on a signal: exit 130
    summary = {"result": result, "reason": outcome.reason, "run_dir": str(directory), "serial": True, **outcome.figures}
    click.echo(json.dumps(summary) if as_json else f"{format_line(outcome.figures)}\n{result}: {outcome.reason}")
    if outcome.interrupted:
        sys.exit(int(ExitCode.INTERRUPTED))
