"""The options the bench commands share: an example config by default, --json, --quick, seeds, lists of counts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from tandem.client.bench.examples import example_config

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")


def quick_option(what: str) -> Callable:
    """`--quick`: a short run doing `what`; its help says the figures are not to be quoted."""
    return click.option("--quick", is_flag=True, help=f"{what} (a smoke run, not a figure to quote).")


def example_config_option(example: str, help: str) -> Callable:
    """`--config FILE`, by default the example config named `example` (from a checkout or an installed Tandem).

    The default is a callable, not a path worked out at import: `tandem bench all` invokes the commands
    without their command line, and click fills in a callable default there as well.
    """
    return click.option(
        "--config",
        "config",
        type=click.Path(dir_okay=False, path_type=Path),
        default=lambda: example_config(example),
        help=f"{help}  [default: examples/{example} of a checkout]",  # click would show the callable
    )


def seed_options(default: int) -> Callable:
    """`--seeds N --first-seed S`: seeds S..S+N-1, one run each."""
    seeds = click.option(
        "--seeds",
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help="How many seeds: S..S+N-1, one run each.",
    )
    first_seed = click.option(
        "--first-seed",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="S: the first seed (to add seeds to an earlier measurement, one call at a time).",
    )
    return lambda command: seeds(first_seed(command))


class Counts(click.ParamType):
    """A comma-separated list of whole numbers (actors, replicas, games); with `least`, not empty and none below it."""

    name = "counts"

    def __init__(self, least: int | None = None):
        self.least = least

    def convert(self, value, param, ctx) -> list[int]:
        if isinstance(value, list):
            return value
        try:
            counts = [int(c) for c in value.split(",") if c.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if self.least is not None and (not counts or min(counts) < self.least):
            self.fail(f"{value!r}: expected counts of at least {self.least}, such as 1,2", param, ctx)
        return counts


def counts_option(flag: str, name: str, default: str, help: str, least: int | None = None) -> Callable:
    """An option taking a comma-separated list of counts (`flag` such as `--actors`), as a list of ints."""
    return click.option(flag, name, type=Counts(least), default=default, show_default=True, help=help)
