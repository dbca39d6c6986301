"""`tandem config show|check FILE`: the fully resolved config, or a clear error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NoReturn

import click

from tandem.daemons.config import ConfigError, RunConfig, config_to_dict, load_config, render_toml
from tandem.daemons.config.loader import read_config
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.file_order import FileOrder


def override_option(scope: str = "") -> Callable:
    """The `--set SECTION.KEY=VALUE` option every command that loads a config takes; `scope` ends its help."""
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="SECTION.KEY=VALUE",
        help=f"Override one config field{scope} (repeatable); VALUE is read as TOML, else as a string.",
    )


set_option = override_option()
bench_set_option = override_option(" in every run, after the bench's own settings")
# after mistakes in what the env or the networks are built from: the probe would blame what the file does not say
NOT_PROBED = "(the env and the networks are built once the mistakes above are fixed: there may be more)"


def load_or_exit(path: str, overrides: tuple[str, ...]) -> RunConfig:
    """Load a config; on any problem print each (a line each, in file order) and exit with ExitCode.CONFIG."""
    try:
        return load_config(path, overrides)
    except ConfigError as exc:
        refuse(path, [str(problem) for problem in exc.problems])


def read_or_exit(path: str, overrides: tuple[str, ...]) -> tuple[RunConfig, list[ConfigError], FileOrder]:
    """`read_config`'s config, problems and key order; a file that cannot be read at all ends here, as above."""
    try:
        return read_config(path, overrides)
    except ConfigError as exc:
        refuse(path, [str(exc)])


def refuse(path: str, problems: list[str], note: str = "") -> NoReturn:
    """Print each problem of the config at `path` on a line of its own, then `note`, and exit with ExitCode.CONFIG."""
    for problem in problems:
        click.echo(f"error: {path}: {problem}", err=True)
    if note:
        click.echo(note, err=True)
    raise SystemExit(int(ExitCode.CONFIG))


@click.group("config")
def config_group() -> None:
    """Inspect and validate run configs (TOML)."""


@config_group.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of annotated TOML.")
@click.option("--no-docs", is_flag=True, help="Leave out the one-line doc above each key.")
def show(file: str, overrides: tuple[str, ...], as_json: bool, no_docs: bool) -> None:
    """Print FILE fully resolved: every section and key, defaults included."""
    config = load_or_exit(file, overrides)
    if as_json:
        click.echo(json.dumps(config_to_dict(config), indent=2))
    else:
        click.echo(render_toml(config, with_docs=not no_docs), nl=False)


@config_group.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@set_option
@click.option(
    "--no-probe",
    is_flag=True,
    help="Only read the file: do not build an env and the networks (for a config meant for another machine).",
)
def check(file: str, overrides: tuple[str, ...], no_probe: bool) -> None:
    """Exit 0 if FILE is a valid run config that can run here; otherwise name every mistake, a line each in the
    order of the file, and exit 3.

    Besides the keys and values, it probes as the daemons will: checks that run.dir can be written, imports a
    `module:callable` env or network (looking beside FILE and in the working directory, as `tandem up` does),
    builds one env, checks the algorithm against its spaces, builds each policy's network and checks the
    devices. `tandem up` runs the same checks before it starts anything.
    """
    from tandem.client.preflight import findings, probe

    config, problems, order = read_or_exit(file, overrides)
    actors = f"{config.actors.count} actor{'' if config.actors.count == 1 else 's'}"
    summary = f"run {config.run.name!r}, env {config.env.id!r}, {actors}"
    if no_probe:
        found = findings(config, problems, order, None)
    else:
        found = findings(config, problems, order, lambda c: probe(c, file, c.supervisor.build_env_deadline_s))
    if found.problems:
        refuse(file, found.problems, NOT_PROBED if found.blocked else "")
    if found.report is None:
        click.echo(f"{file}: ok ({summary}; not probed)")
        return
    click.echo(f"{file}: ok ({summary})")
    for line in found.report.lines:
        click.echo(f"  {line}")
    for line in found.report.skipped:
        click.echo(f"  not probed: {line}")
