"""A click group whose subcommands are imported only when run, so `tandem status` never pays for torch."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import click


class LazyGroup(click.Group):
    """Subcommands named in a table of `name -> ("module:attribute", short help)`.

    `--help` lists them from the table without importing anything; running one imports its module.
    (A test checks that each table entry's help matches its command's own.)
    """

    def __init__(self, *args, lazy: Mapping[str, tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            return load_command(self.lazy[name][0])
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy[name][1]) for name in self.list_commands(ctx) if name in self.lazy]
        rows += [(name, cmd.get_short_help_str()) for name, cmd in self.commands.items() if name not in self.lazy]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))


def load_command(target: str) -> click.Command:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
