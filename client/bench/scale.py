"""`tandem bench scale`: total env steps/s with 1, 2, 4 and 8 actors on CartPole, next to the machine's cores."""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator

import click

from tandem.client.bench.isolation import run_phase
from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish

COUNTS = (1, 2, 4, 8)


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, which a container or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@click.command("scale")
@click.option("--seconds", default=8.0, show_default=True, help="Measuring window per actor count (--quick: 2).")
@click.option(
    "--repeats", default=3, show_default=True, help="Fresh processes per count; medians are reported (--quick: 1)."
)
@json_option
@quick_option("1 and 2 actors, one 2 s window each")
def scale_cmd(seconds: float, repeats: int, as_json: bool, quick: bool) -> None:
    """Total env steps/s of 1, 2, 4 and 8 real actor daemons (beside a learner that only receives)."""
    counts = COUNTS
    if quick:
        seconds, repeats, counts = 2.0, 1, (1, 2)
    cores = usable_cores()
    rows = []
    for n in counts:
        rates = [run_phase(False, seconds, actors=n)["steps_per_s"] for _ in range(repeats)]
        rows.append({"actors": n, "steps_per_s": round(statistics.median(rates), 1)})
    base = rows[0]["steps_per_s"]
    for row in rows:
        row["speedup"] = round(row["steps_per_s"] / base, 3) if base > 0 else 0.0
        # Per-core efficiency: speed-up over the cores the actors could use at best.
        row["efficiency"] = round(row["speedup"] / min(row["actors"], cores), 3)
    record = {
        "benchmark": "scale",
        "quick": quick,
        "machine": {"cpu_count": os.cpu_count(), "usable_cores": cores},
        "env": "CartPole-v1",
        "rows": rows,
        "target": None,
        "met": None,
    }
    finish(record, as_json, table(rows, cores))


def table(rows: list[dict], cores: int) -> Iterator[str]:
    """The rows as a table for people."""
    yield f"{'actors':>6} {'steps/s':>10} {'speed-up':>9} {'per-core eff.':>14}   ({cores} usable cores)"
    for row in rows:
        yield f"{row['actors']:>6} {row['steps_per_s']:>10.0f} {row['speedup']:>9.2f} {row['efficiency']:>14.2f}"
