"""An operator's commands answer at once: `--version`, `--help`, `status`, `config check --no-probe` load no torch."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tandem.client.bench.group import COMMANDS as BENCH_COMMANDS
from tandem.client.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "examples" / "cartpole.toml")


def run_and_list_modules(args: list[str]) -> tuple[int, str, set[str]]:
    """Run `tandem ARGS` in a fresh interpreter through the CLI module; its exit code, output and loaded packages."""
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom tandem.client.cli import cli\n"
        f"result = CliRunner().invoke(cli, {args!r})\n"
        "print(result.exit_code)\nprint(result.output.replace(chr(10), ' '))\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    exit_code, output, modules = result.stdout.splitlines()[-3:]
    return int(exit_code), output, set(modules.split())


@pytest.mark.parametrize(
    "args, want_code, want_text",
    [
        (["--version"], 0, "tandem, version"),
        (["--help"], 0, "status"),
        (["status", "--endpoint", "tcp://127.0.0.1:9", "--timeout", "0.2"], 4, "did not answer"),
        (["config", "check", CARTPOLE, "--no-probe"], 0, "not probed"),
        (["plot", str(ROOT / "examples")], 2, "metrics.jsonl does not exist"),
    ],
)
def test_operator_commands_load_no_torch(args, want_code, want_text):
    code, output, modules = run_and_list_modules(args)
    assert code == want_code and want_text in output, output
    assert "torch" not in modules and "matplotlib" not in modules  # `tandem plot` imports it when it draws


@pytest.mark.parametrize("table", [COMMANDS, BENCH_COMMANDS], ids=["tandem", "bench"])
def test_the_lazy_help_table_matches_each_commands_own_help(table):
    for name, (target, short_help) in table.items():
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert command.name == name
        assert short_help == command.get_short_help_str(limit=80), name
