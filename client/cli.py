"""The `tandem` command: a click group whose subcommands live in small modules beside this one."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

import click

from client.bench.group import bench_group
from client.config_cmd import config_group
from client.control_cmds import restart_cmd, status_cmd, stop_cmd
from client.daemon_cmds import actor_cmd, evaluator_cmd, learner_cmd
from client.up import supervise_cmd, up_cmd
from client.exit_codes import ExitCode


def tandem_version() -> str:
    try:
        return version("tandem")
    except PackageNotFoundError:
        return "0+unknown"


@dataclass
class CliContext:
    """What every subcommand may need; handed down by click as `ctx.obj`."""

    verbose: bool = False

    def fail(self, message: str, code: ExitCode) -> None:
        """Print an error for a person (no traceback) and exit with `code`."""
        click.echo(f"error: {message}", err=True)
        sys.exit(int(code))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tandem_version(), "--version", prog_name="tandem")
@click.option("-v", "--verbose", is_flag=True, help="More detail in messages.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Tandem: actors and learners over ZeroMQ, kept alive by a supervisor."""
    ctx.obj = CliContext(verbose=verbose)


for command in (config_group, bench_group, up_cmd, supervise_cmd, status_cmd, stop_cmd, restart_cmd, actor_cmd, learner_cmd, evaluator_cmd):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="tandem")
