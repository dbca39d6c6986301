"""Resolves a user's 'package.module:attr.path' plug-in (an env factory, a model, an algorithm) to its object."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tandem.daemons.runtime.setup_errors import SetupError


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


def not_found_hint(exc: ImportError, module_name: str) -> str:
    """Where a missing module was looked for: `tandem up` puts the config file's folder and the working
    directory on every daemon's path; anything else needs installing or PYTHONPATH."""
    if not isinstance(exc, ModuleNotFoundError) or not (exc.name and module_name.startswith(exc.name)):
        return ""  # the module itself was found; something it imports is missing, and the message says what
    return (
        "; Tandem looks in the config file's folder, the working directory, PYTHONPATH and the installed "
        "packages: install it (pip install -e) or add its folder to PYTHONPATH"
    )


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
