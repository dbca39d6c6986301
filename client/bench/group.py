"""The `tandem bench` command group."""

import click

from client.bench.all import all_cmd
from client.bench.broadcast import broadcast_cmd
from client.bench.e2e import e2e_cmd
from client.bench.isolation import isolation_cmd
from client.bench.replay import replay_cmd
from client.bench.scale import scale_cmd
from client.bench.transport import transport_cmd


@click.group("bench")
def bench_group() -> None:
    """Benchmarks: figures for people, or one JSON record with --json."""


BENCHMARKS = (broadcast_cmd, e2e_cmd, replay_cmd, transport_cmd, isolation_cmd, scale_cmd)

for command in (*BENCHMARKS, all_cmd):
    bench_group.add_command(command)
