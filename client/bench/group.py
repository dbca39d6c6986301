"""The `tandem bench` command group."""

import click

from client.bench.e2e import e2e_cmd


@click.group("bench")
def bench_group() -> None:
    """Benchmarks: figures for people, or one JSON record with --json."""


bench_group.add_command(e2e_cmd)
