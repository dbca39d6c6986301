"""`tandem actor`, `tandem learner` and `tandem evaluator`: run one daemon in the foreground (for up, systemd, tmux)."""

from __future__ import annotations

import logging
import sys

import click

from client.config_cmd import load_or_exit, set_option
from client.exit_codes import ExitCode
from daemons.envs import EnvBuildError
from daemons.runtime import StopFlag, die_with_parent, setup_logging
from protocol import TransportError

control_option = click.option("--control", metavar="ENDPOINT", default=None,
                              help="Supervisor control endpoint to send heartbeats to (set by `tandem up`).")
parent_option = click.option("--die-with-parent", is_flag=True, hidden=True,
                             help="Exit when the launching process dies (used by `tandem up`).")


def run_daemon(name: str, level: str, with_parent: bool, make) -> None:
    """Common wrapper: logging, signals, and a clear one-line error instead of a traceback."""
    setup_logging(level, name)
    if with_parent:
        die_with_parent()
    stop = StopFlag().install()
    try:
        code = make(stop).run()
    except (EnvBuildError, TransportError, ValueError) as exc:
        logging.getLogger(name).error("%s", exc)
        click.echo(f"error: {name}: {exc}", err=True)
        sys.exit(int(ExitCode.FAILURE))
    sys.exit(code)


@click.command("actor")
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option("--index", type=click.IntRange(min=0), required=True, help="This actor's index (0-based).")
@control_option
@parent_option
@set_option
def actor_cmd(config_file, index, control, die_with_parent, overrides):
    """Run actor number INDEX of CONFIG_FILE: step envs, push transitions, follow the learner's weights."""
    from daemons.actor import make_actor

    config = load_or_exit(config_file, overrides)
    run_daemon(f"actor-{index}", config.run.log_level, die_with_parent,
               lambda stop: make_actor(config, index, stop, control))


@click.command("learner")
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option("--policy", default="default", show_default=True, help="The policy this learner trains.")
@click.option("--device", default=None, help="Torch device, overriding learner.device (e.g. cuda:0).")
@control_option
@click.option("--join", default=None, metavar="ENDPOINT",
              help="Join the supervisor at ENDPOINT (tcp://HEAD:PORT): register there so its actors find this learner.")
@click.option("--bind", "bind", default=None, metavar="tcp://ADDR:PORT",
              help="Bind the transitions, weights and snapshot sockets on PORT, PORT+1, PORT+2 of ADDR (or ADDR:* for free ports).")
@click.option("--insecure", is_flag=True, help="Allow a bind beyond loopback without authentication (status says so).")
@parent_option
@set_option
def learner_cmd(config_file, policy, device, control, join, bind, insecure, die_with_parent, overrides):
    """Run the learner of POLICY: replay, training, weight publishing, checkpoints."""
    from daemons.learner import Learner

    config = load_or_exit(config_file, overrides)
    run_daemon(f"learner-{policy}", config.run.log_level, die_with_parent,
               lambda stop: Learner(config, policy, stop, join or control, device, bind=bind, insecure=insecure))


@click.command("evaluator")
@click.argument("config_file", type=click.Path(dir_okay=False))
@control_option
@parent_option
@set_option
def evaluator_cmd(config_file, control, die_with_parent, overrides):
    """Run the greedy evaluator: rounds of episodes with the newest weights, mean return reported."""
    from daemons.evaluator import make_evaluator

    config = load_or_exit(config_file, overrides)
    run_daemon("evaluator", config.run.log_level, die_with_parent, lambda stop: make_evaluator(config, stop, control))
