"""A user's plug-in that does not import: the module itself missing, or a package it needs (and the extra of
Tandem that brings it), told apart."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from tandem.client.cli import cli
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.plugins import import_callable


def project(tmp_path, module: str, body: str):
    """A config and, beside it, the env module it names (as a user keeps them)."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
    config = tmp_path / "run.toml"
    config.write_text(f"[run]\ndir = '{tmp_path}/run'\n[env]\nid = '{module}:make'\n")
    return config


@pytest.mark.parametrize(
    "module, body, words",
    [
        (
            "plugin_needs_a_package_nowhere",
            "import tandem_test_no_such_package\n\ndef make():\n    pass\n",
            [
                "'plugin_needs_a_package_nowhere' was found but needs the package 'tandem_test_no_such_package'",
                "which is not installed: install 'tandem_test_no_such_package'",
            ],
        ),
        (
            "minigrid_tandem_test_env",  # a name that begins as the package does, as minigrid_dict.py
            # what `import minigrid` raises where the minigrid extra is not installed
            "raise ModuleNotFoundError(\"No module named 'minigrid'\", name='minigrid')\n",
            ["needs the package 'minigrid', which is not installed: pip install -e \".[minigrid]\""],
        ),
        (
            "wandb_tandem_test_env",
            "raise ModuleNotFoundError(\"No module named 'wandb'\", name='wandb')\n",
            ['pip install -e ".[tracking]" (Tandem\'s tracking extra)'],
        ),
    ],
)
def test_a_missing_package_is_named_with_its_extra_not_taken_for_the_plugin(tmp_path, module, body, words):
    # `minigrid_dict.py` beside its config was said to be missing ("add its folder to PYTHONPATH") when the
    # minigrid package was: the check took module names that begin alike for the same module.
    result = CliRunner().invoke(cli, ["config", "check", str(project(tmp_path, module, body))])
    assert result.exit_code == ExitCode.CONFIG, result.output
    for word in words:
        assert word in result.output, result.output
    assert "PYTHONPATH" not in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_a_missing_plugin_is_still_looked_for_where_tandem_looks(tmp_path):
    with pytest.raises(ValueError) as err:
        import_callable("tandem_test_plugin_nowhere:make", "env.id")
    assert "cannot import module 'tandem_test_plugin_nowhere'" in str(err.value)
    assert "add its folder to PYTHONPATH" in str(err.value) and "was found" not in str(err.value)


def test_a_missing_module_of_an_installed_package_is_not_called_a_missing_package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plugin_needs_a_json_module.py").write_text("import json.tandem_test_nothing_here\n")
    with pytest.raises(ValueError) as err:
        import_callable("plugin_needs_a_json_module:make", "env.id")
    assert "imports 'json.tandem_test_nothing_here', which the installed 'json' does not have" in str(err.value)
