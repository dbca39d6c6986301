"""`tandem actor`, `tandem learner` and `tandem evaluator`: run one daemon in the foreground (systemd, tmux, Slurm).

Each command only describes the daemon; `tandem.daemons.main.run` runs it, as it does for `tandem up`'s children.
"""

from __future__ import annotations

import sys

import click

from tandem.client.config_cmd import set_option

control_option = click.option(
    "--control",
    metavar="ENDPOINT",
    default=None,
    help="Supervisor control endpoint to send heartbeats to (set by `tandem up`).",
)
parent_option = click.option(
    "--die-with-parent", is_flag=True, hidden=True, help="Exit when the launching process dies."
)


def run_daemon(
    role: str, config_file: str, overrides: tuple[str, ...], control: str | None, die_with_parent: bool, **fields
) -> None:
    """Run one daemon here until it ends, then exit with its code; `fields` are its role's own (DaemonSpec)."""
    from tandem.daemons.main import DaemonSpec, run

    sys.exit(run(DaemonSpec(role, config_file, overrides, control, die_with_parent=die_with_parent, **fields)))


@click.command("actor")
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option("--index", type=click.IntRange(min=0), required=True, help="This actor's index (0-based).")
@control_option
@click.option(
    "--insecure",
    is_flag=True,
    help="(actors.mode = 'serve') Allow a game socket bound beyond loopback without authentication.",
)
@parent_option
@set_option
def actor_cmd(config_file, index, control, insecure, die_with_parent, overrides):
    """Run actor number INDEX of CONFIG_FILE: step envs, push transitions, follow the learner's weights.

    With actors.mode = "serve" it is an action server: game processes connect and ask for actions.
    """
    run_daemon("actor", config_file, overrides, control, die_with_parent, index=index, insecure=insecure)


@click.command("learner")
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option("--policy", default="default", show_default=True, help="The policy this learner trains.")
@click.option("--device", default=None, help="Torch device, overriding learner.device (e.g. cuda:0).")
@control_option
@click.option(
    "--join",
    default=None,
    metavar="ENDPOINT",
    help="Join the supervisor at ENDPOINT (tcp://HEAD:PORT): register there so its actors find this learner.",
)
@click.option(
    "--bind",
    "bind",
    default=None,
    metavar="tcp://ADDR:PORT",
    help="Bind the transitions, weights and snapshot sockets on PORT, PORT+1, PORT+2 of ADDR (ADDR:* for free ports).",
)
@click.option("--insecure", is_flag=True, help="Allow a bind beyond loopback without authentication (status says so).")
@click.option(
    "--rank",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="With learner.replicas = N: this learner is replica RANK (0..N-1; 0 publishes and checkpoints). A rank "
    "above 0 needs --bind: its actors find its transitions socket there again after a restart.",
)
@parent_option
@set_option
def learner_cmd(config_file, policy, device, control, join, bind, insecure, rank, die_with_parent, overrides):
    """Run the learner of POLICY: replay, training, weight publishing, checkpoints."""
    if rank > 0 and bind is None:
        raise click.UsageError("--rank above 0 needs --bind tcp://ADDR:PORT: the replica's own fixed ports")
    fields = {"rank": rank, "policy": policy, "device": device, "bind": bind, "insecure": insecure}
    run_daemon("learner", config_file, overrides, join or control, die_with_parent, **fields)


@click.command("evaluator")
@click.argument("config_file", type=click.Path(dir_okay=False))
@control_option
@parent_option
@set_option
def evaluator_cmd(config_file, control, die_with_parent, overrides):
    """Run the greedy evaluator: rounds of episodes with the newest weights, mean return reported."""
    run_daemon("evaluator", config_file, overrides, control, die_with_parent)
