"""`option`: a config field with its one-line doc and the bounds that make a value impossible."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def option(
    default: Any,
    doc: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: tuple[Any, ...] | None = None,
    above: float | None = None,
) -> Any:
    """A config field with its one-line doc and the bounds that make a value impossible."""
    meta = {"doc": doc, "min": min, "max": max, "choices": choices, "above": above}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)
