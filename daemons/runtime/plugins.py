"""Resolves a user's 'package.module:attr.path' plug-in (an env factory, a model) to a callable."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def import_callable(spec: str, key: str) -> Callable[..., Any]:
    """The callable `spec` names; ValueError starting with the config `key` and saying what is missing."""
    module_name, _, attr_path = spec.partition(":")
    if not module_name or not attr_path:
        raise ValueError(f"{key} {spec!r}: expected 'module:callable'")
    try:
        target = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{key} {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{key} {spec!r}: module {module_name!r} has no attribute {attr_path!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{key} {spec!r}: {attr_path!r} is a {type(target).__name__}, not a callable")
    return target
