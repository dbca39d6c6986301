"""`tandem bench all`: runs every benchmark and prints one combined record."""

from __future__ import annotations

import contextlib
import io
import json

import click


def run_json(ctx: click.Context, command: click.Command, quick: bool) -> dict:
    """Run one benchmark with --json and return its record (its printed output is captured, not shown)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ctx.invoke(command, as_json=True, quick=quick)
    lines = out.getvalue().strip().splitlines()
    return json.loads(lines[-1])


@click.command("all")
@click.option("--json", "as_json", is_flag=True, help="Print one combined JSON record.")
@click.option("--quick", is_flag=True, help="Run every benchmark in its --quick mode.")
@click.pass_context
def all_cmd(ctx: click.Context, as_json: bool, quick: bool) -> None:
    """Run every benchmark; print each one's targets and whether they were met."""
    from tandem.client.bench.group import BENCHMARKS
    from tandem.client.lazy import load_command

    records = {}
    for command in (load_command(target) for target, _ in BENCHMARKS.values()):
        if not as_json:
            click.echo(f"== {command.name} ...")
        records[command.name] = run_json(ctx, command, quick)
        if not as_json:
            click.echo(f"   target {records[command.name].get('target')}: met {records[command.name].get('met')}")
    record = {"benchmark": "all", "quick": quick, "records": records}
    if as_json:
        click.echo(json.dumps(record))
