"""Lets an editable install of Tandem win over a folder named `tandem` in the working directory.

Seen from the folder that holds a clone, the clone itself is a folder named `tandem` with no __init__.py:
Python's path search takes it for a namespace package, and setuptools' editable finder, which runs after the
path search, is never asked. `make setup` copies this file into site-packages and imports it from a .pth,
so that a regular `tandem` package anywhere on sys.path still wins (a copy installed elsewhere, or the
checkout's own `tandem/` when Python starts in it), and a namespace folder never does.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec, PathFinder

EDITABLE_FINDER_PREFIX = "__editable___tandem_"  # the module setuptools writes for `pip install -e .`


class EditableBeforeNamespace:
    """A meta-path finder for the top-level name `tandem` only; every other name is left to the others."""

    @classmethod
    def find_spec(cls, name: str, path=None, target=None) -> ModuleSpec | None:
        if name != "tandem":
            return None
        found = PathFinder.find_spec(name, path)
        if found is not None and found.origin is not None:
            return found  # a regular package on sys.path: it wins, as it would without this finder
        for finder in sys.meta_path:
            if getattr(finder, "__module__", "").startswith(EDITABLE_FINDER_PREFIX):
                return finder.find_spec(name, path, target)
        return None  # no editable install: the path search decides, as before


def install() -> None:
    if EditableBeforeNamespace not in sys.meta_path:
        sys.meta_path.insert(0, EditableBeforeNamespace)


install()
