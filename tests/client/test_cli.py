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


def errors(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("error:")]


def test_config_check_names_every_mistake_in_file_order_probe_and_run_dir_included(tmp_path):
    # Three mistakes took three rounds, not in file order; the run directory was not checked at all.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = tmp_path / "bad.toml"
    path.write_text(
        f"[run]\nnme = 'x'\ndir = '{blocker}/run'\n[env]\nid = 'CartPol-v1'\n[stop]\nsecnds = 3\n"
        "[supervisor]\nliveness_timeout_s = 0.5\n"
    )
    result = run("config", "check", str(path))
    assert result.exit_code == ExitCode.CONFIG, result.output
    lines = errors(result)
    starts = [line.removeprefix(f"error: {path}: ").split(" ")[0].rstrip(":") for line in lines]
    assert starts == ["run.nme", "run.dir", "env.id", "stop.secnds", "supervisor.liveness_timeout_s"], lines
    assert f"{blocker} is not a folder" in lines[1] and "set run.dir to a folder you can write" in lines[1]
    assert "Environment `CartPol` doesn't exist" in lines[2]  # the probe ran: the other mistakes are elsewhere


def test_config_check_does_not_probe_what_a_mistake_already_names_and_says_so(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[env]\nid = 'CartPol-v1'\nnum_env = 3\n")
    result = run("config", "check", str(path))
    assert result.exit_code == ExitCode.CONFIG
    assert [line.split(": ")[2] for line in errors(result)] == ["env.num_env"], result.output
    assert "built once the mistakes above are fixed" in result.output


def test_an_algorithm_that_cannot_act_in_the_env_names_those_that_can():
    result = run("config", "check", CARTPOLE, "--set", "env.id=Pendulum-v1")
    assert result.exit_code == ExitCode.CONFIG
    (line,) = errors(result)
    assert "double_dqn needs a Discrete action space" in line and 'use algorithm.name = "appo"' in line, line
    assert '"sac"' in line and '"double_dqn"' not in line.partition("use ")[2], line
