"""A newcomer's set-up runs what CI runs: `make test` installs every Python package a test needs, and the installed
package is found wherever Python starts."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def test_the_test_extra_brings_every_other_extra():
    # A test of an extra's feature would otherwise fail (or skip) on a newcomer's `make test` while CI passes.
    pulled = set()
    for requirement in extras()["test"]:
        if match := re.fullmatch(r"tandem\[([\w,\s-]+)\]", requirement.strip()):
            pulled |= {name.strip() for name in match[1].split(",")}
    missing = set(extras()) - {"test"} - pulled
    assert not missing, f"the test extra does not pull in {sorted(missing)}: add them to tandem[...] in it"


def test_ci_prepare_installs_no_python_package():
    # What CI alone installs a newcomer lacks: prepare.sh may add system packages only.
    script = (ROOT / ".ci" / "prepare.sh").read_text(encoding="utf-8")
    commands = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if re.search(r"\bpip\b|\bmake setup\b|uv ", line)], (
        ".ci/prepare.sh installs Python packages; put them in pyproject.toml's test extra instead"
    )
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_installed_package_wins_over_a_folder_named_tandem(tmp_path):
    # Seen from the folder that holds a clone, the clone is a folder named `tandem` in the working directory: a
    # namespace package that hid the editable install (`make setup` installs tandem/editable_first.py).
    (tmp_path / "tandem").mkdir()
    (tmp_path / "tandem" / "README.md").write_text("a clone's files\n")
    done = subprocess.run(
        [sys.executable, "-c", "from tandem import load_policy; import tandem.daemons; print(load_policy.__module__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"`from tandem import load_policy` failed beside a folder named tandem:\n{done.stderr}"
    assert done.stdout.strip() == "tandem.client.api.policy"
