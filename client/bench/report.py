"""How a bench prints: progress lines for people (none with --json), then one JSON record or its summary lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import click


def progress(as_json: bool) -> Callable[[str], None]:
    """Echo one progress line, or nothing where the output is to be one JSON record."""
    return (lambda line: None) if as_json else click.echo


def finish(record: dict, as_json: bool, summary: Iterable[str]) -> None:
    """The record as one JSON line with --json, else the summary's lines (a generator is only run for people)."""
    if as_json:
        click.echo(json.dumps(record))
        return
    for line in summary:
        click.echo(line)


def target_lines(met: dict[str, bool]) -> list[str]:
    """A line per target: whether it was met."""
    return [f"target {name}: {'met' if ok else 'NOT met'}" for name, ok in met.items()]
