"""`tandem serve`: a trained policy behind an action server, with no learner and no training (docs/guides/games.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tandem.client.api.trained import PolicyError
from tandem.daemons.runtime.exit_codes import ExitCode


@click.command("serve")
@click.argument("source", metavar="CHECKPOINT_OR_RUN")
@click.option("--policy", default=None, help="Which policy of a multi-agent run (default: 'default').")
@click.option(
    "--checkpoint",
    type=click.Choice(["latest", "best", "solved"]),
    default=None,
    help="Which checkpoint of a run directory (default: latest).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default="runs/serve",
    show_default=True,
    help="Where the server writes its address (games/actor-0.endpoint: `find_endpoint(DIR)` reads it) and stream ids.",
)
@click.option(
    "--bind",
    default="tcp://127.0.0.1:0",
    show_default=True,
    help="The game socket's address (port 0: a free one; ipc:// for games on this machine).",
)
@click.option("--insecure", is_flag=True, help="Allow a bind beyond loopback without authentication.")
@click.option("--sample", is_flag=True, help="Sample each action from the policy instead of taking the greedy one.")
@click.option("--max-streams", type=click.IntRange(min=1), default=None, help="Most game streams at once.")
def serve_cmd(source, policy, checkpoint, directory, bind, insecure, sample, max_streams) -> None:
    """Serve a trained policy to games, with no learner and no training, until Ctrl-C.

    The games speak the game protocol a run's action server speaks (the same client library and checks);
    SOURCE is a run directory, a checkpoint file or an exported directory. A status line goes to stdout
    every 5 s.
    """
    from tandem.client.api.policy import load_policy
    from tandem.daemons.config import ConfigError, config_to_dict
    from tandem.daemons.config.loader import config_from_dict

    try:
        trained = load_policy(source, policy, checkpoint=checkpoint)
    except PolicyError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(exc.code))
    table = without_none(config_to_dict(trained.spec.config))
    table["run"] = {**table.get("run", {}), "dir": str(Path(directory).resolve())}
    serve = {**table.get("actors", {}).get("serve", {}), "bind": bind}
    if max_streams is not None:
        serve["max_streams"] = max_streams
    table["actors"] = {**table.get("actors", {}), "mode": "serve", "count": 1, "serve": serve}
    table.pop("policies", None)
    try:
        config = config_from_dict(table)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(run_frozen(config, trained, sample, insecure))


def run_frozen(config, trained, sample: bool, insecure: bool) -> int:
    """Run the server here until a signal stops it; its exit code."""
    from tandem.daemons.actor.serve.frozen import frozen_server
    from tandem.daemons.runtime.logs import setup_logging
    from tandem.daemons.runtime.signals import StopFlag

    setup_logging(config.run.log_level, "serve")
    Path(config.run.dir).mkdir(parents=True, exist_ok=True)
    stop = StopFlag().install()
    try:
        return int(frozen_server(config, trained, stop, sample=sample, insecure=insecure).run())
    except (ValueError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        return int(ExitCode.FAILURE)


def without_none(table: dict) -> dict:
    """The config's table without its unset keys (None is how a dict says `not set`; a config file leaves them out)."""
    return {k: without_none(v) if isinstance(v, dict) else v for k, v in table.items() if v is not None}
