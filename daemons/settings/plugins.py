"""Resolves a user's 'package.module:attr.path' plug-in (an env factory, a model, an algorithm) to its object."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tandem.daemons.settings.setup_errors import SetupError


def import_callable(spec: str, key: str) -> Callable[..., Any]:
    """The callable `spec` names; SetupError (a ValueError) starting with the config `key` and saying what is
    missing; a module that is not found gets a hint about where Tandem looks for it."""
    target = import_object(spec, key)
    if not callable(target):
        raise SetupError(f"{key} {spec!r}: {spec.partition(':')[2]!r} is a {type(target).__name__}, not a callable")
    return target


def import_object(spec: str, key: str, form: str = "module:callable") -> Any:
    """What 'package.module:attr.path' names (a callable, an algorithm object); SetupError as import_callable."""
    module_name, _, attr_path = spec.partition(":")
    if not module_name or not attr_path:
        raise SetupError(f"{key} {spec!r}: expected {form!r}")
    try:
        target = importlib.import_module(module_name)
    except ImportError as exc:
        raise SetupError(
            f"{key} {spec!r}: cannot import module {module_name!r} ({exc}){not_found_hint(exc, module_name)}"
        ) from exc
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise SetupError(f"{key} {spec!r}: module {module_name!r} has no attribute {attr_path!r}")
        target = getattr(target, part)
    return target


# Packages an extra of Tandem's pyproject.toml brings, by import name: a plug-in that imports one of them
# misses the extra, not itself.
EXTRAS = {
    "envpool": "envpool",
    "tensorboard": "tensorboard",
    "wandb": "tracking",
    "mujoco": "mujoco",
    "minigrid": "minigrid",
}


def not_found_hint(exc: ImportError, module_name: str) -> str:
    """What to do about `module_name` not importing. The module itself not found: where Tandem looked for it
    (`tandem up` puts the config file's folder and the working directory on every daemon's path). A package it
    imports not found: that package, and the extra of Tandem that installs it where one does."""
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if not missing:
        return ""  # the module was found and failed in some other way; the message says how
    if missing == module_name or module_name.startswith(f"{missing}."):
        return (
            "; Tandem looks in the config file's folder, the working directory, PYTHONPATH and the installed "
            "packages: install it (pip install -e) or add its folder to PYTHONPATH"
        )
    package = missing.partition(".")[0]
    if package == module_name.partition(".")[0]:  # a module of the plug-in's own package
        return f"; {module_name!r} was found but imports {missing!r}, which is not"
    if package != missing and importlib.util.find_spec(package) is not None:
        return f"; {module_name!r} was found but imports {missing!r}, which the installed {package!r} does not have"
    extra = EXTRAS.get(package)
    install = f'pip install -e ".[{extra}]" (Tandem\'s {extra} extra)' if extra else f"install {package!r}"
    return f"; {module_name!r} was found but needs the package {package!r}, which is not installed: {install}"


def plugin_folders(config_file: str | os.PathLike[str]) -> tuple[str, ...]:
    """Where a user's env or network module is looked for besides the installed packages and PYTHONPATH:
    the config file's folder, then the working directory."""
    return tuple(dict.fromkeys([str(Path(config_file).resolve().parent), str(Path.cwd())]))


IMPORT_PATHS_FILE = "import_paths.json"  # in a run directory: the folders its daemons import user modules from


def run_import_paths(run_dir: Path) -> list[str]:
    """The folders a run's daemons imported the user's modules from, as `tandem up` recorded them (none for a run
    directory without the file, or with one that is not a JSON list of strings)."""
    try:
        folders = json.loads((run_dir / IMPORT_PATHS_FILE).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(folders, list):
        return []
    return [f for f in folders if isinstance(f, str) and Path(f).is_dir()]


def add_to_path(folders: tuple[str, ...] | list[str]) -> None:
    """Append `folders` to `sys.path` (appended, not prepended: a file there never shadows an installed
    package, so a stray `gymnasium.py` cannot replace gymnasium)."""
    for folder in folders:
        if folder not in sys.path:
            sys.path.append(folder)
