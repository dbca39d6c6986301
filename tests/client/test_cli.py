"""The `tandem` CLI shell, driven through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.daemons.runtime.exit_codes import ExitCode

CARTPOLE = str(Path(__file__).resolve().parents[2] / "examples" / "cartpole.toml")


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and "tandem, version" in result.output


def test_config_check_ok():
    result = run("config", "check", CARTPOLE)
    assert result.exit_code == ExitCode.OK, result.output
    assert "ok" in result.output


def test_config_check_error_has_no_traceback(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[actors]\ncount = 'two'\n")
    result = run("config", "check", str(path))
    assert result.exit_code == ExitCode.CONFIG
    assert "actors.count: must be an integer" in result.output
    assert "Traceback" not in result.output


def test_config_show_resolves_defaults_and_overrides():
    result = run("config", "show", CARTPOLE, "--set", "actors.count=7", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["actors"]["count"] == 7
    assert data["transport"]["host"] == "127.0.0.1"
    toml_out = run("config", "show", CARTPOLE).output
    assert "[supervisor]" in toml_out and "# Number of actor processes." in toml_out


def test_bad_override_and_missing_file():
    assert run("config", "check", CARTPOLE, "--set", "actors.count").exit_code == ExitCode.CONFIG
    assert run("config", "check", "/nonexistent.toml").exit_code == ExitCode.CONFIG


def test_help_lists_commands():
    result = run("--help")
    assert result.exit_code == 0 and "config" in result.output
