"""The `tandem` command: a click group whose subcommands live in small modules beside this one, imported on use."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from tandem.client.lazy import LazyGroup
from tandem.daemons.runtime.exit_codes import ExitCode

# name -> (where the command is, its one-line help): `tandem --help` lists these without importing them.
COMMANDS = {
    "up": ("tandem.client.up:up_cmd", "Train CONFIG_FILE on this machine until a stop condition, `tandem stop`,..."),
    "supervise": (
        "tandem.client.up:supervise_cmd",
        "Run the supervisor of CONFIG_FILE without progress output (for a head machine...",
    ),
    "status": ("tandem.client.control_cmds:status_cmd", "What every process of a run is doing."),
    "stop": (
        "tandem.client.control_cmds:stop_cmd",
        "Stop a run: every daemon gets SIGTERM (SIGKILL after the grace), learners...",
    ),
    "restart": (
        "tandem.client.control_cmds:restart_cmd",
        "Restart one process by NAME (e.g. actor-3); also brings a FATAL one back.",
    ),
    "plot": (
        "tandem.client.plot_cmd:plot_cmd",
        "Draw a run's curves from RUN_DIR/metrics.jsonl into a PNG (or SVG, PDF).",
    ),
    "config": ("tandem.client.config_cmd:config_group", "Inspect and validate run configs (TOML)."),
    "eval": (
        "tandem.client.policy_cmds:eval_cmd",
        "Play a trained policy greedily on its run's env; mean and std of the return.",
    ),
    "export": (
        "tandem.client.policy_cmds:export_cmd",
        "Write a trained policy as safetensors weights and a JSON spec (no pickle), or...",
    ),
    "serve": (
        "tandem.client.serve_cmd:serve_cmd",
        "Serve a trained policy to games, with no learner and no training, until Ctrl-C.",
    ),
    "keys": (
        "tandem.client.keys_cmds:keys_group",
        "CurveZMQ keys: every link that leaves this machine is encrypted and...",
    ),
    "chaos": (
        "tandem.client.chaos.runner:chaos_cmd",
        "Fault drills on real `tandem up` runs (kills, SIGSTOP, hangs, leaks, bad...",
    ),
    "bench": (
        "tandem.client.bench.group:bench_group",
        "Benchmarks: figures for people, or one JSON record with --json.",
    ),
    "actor": (
        "tandem.client.daemon_cmds:actor_cmd",
        "Run actor number INDEX of CONFIG_FILE: step envs, push transitions, follow...",
    ),
    "learner": (
        "tandem.client.daemon_cmds:learner_cmd",
        "Run the learner of POLICY: replay, training, weight publishing, checkpoints.",
    ),
    "evaluator": (
        "tandem.client.daemon_cmds:evaluator_cmd",
        "Run the greedy evaluator: rounds of episodes with the newest weights, mean...",
    ),
}


@dataclass
class CliContext:
    """What every subcommand may need; handed down by click as `ctx.obj`."""

    verbose: bool = False

    def fail(self, message: str, code: ExitCode) -> None:
        """Print an error for a person (no traceback) and exit with `code`."""
        click.echo(f"error: {message}", err=True)
        sys.exit(int(code))


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "--version", package_name="tandem", prog_name="tandem")  # looked up only when asked
@click.option("-v", "--verbose", is_flag=True, help="More detail in messages.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Tandem: actors and learners over ZeroMQ, kept alive by a supervisor."""
    ctx.obj = CliContext(verbose=verbose)


def main() -> None:
    """`tandem`: Ctrl-C ends any command with ExitCode.INTERRUPTED (130), the code the docs give it, not with
    click's "Aborted!" and 1."""
    try:
        code = cli.main(prog_name="tandem", standalone_mode=False)
    except click.exceptions.Abort:  # click's form of KeyboardInterrupt (and of EOF at a prompt)
        click.echo("interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.ClickException as exc:  # a usage error: shown as click shows it, with its code (2)
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
