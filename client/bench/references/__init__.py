"""Reference figures measured with other RL systems, shipped for `tandem bench learn --reference NAME`."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path


def shipped() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".json"))


def load_reference(name_or_path: str) -> dict:
    """A reference record from a JSON file, or by the name of one shipped here; ValueError naming what is wrong."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read reference {path}: {exc.strerror or exc}") from exc
    else:
        entry = resources.files(__package__) / f"{name_or_path}.json"
        if not entry.is_file():
            raise ValueError(
                f"no reference named {name_or_path!r}; shipped: {', '.join(shipped())} (or give a .json file)"
            )
        text = entry.read_text(encoding="utf-8")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"reference {name_or_path} is not valid JSON: {exc}") from exc
    if not isinstance(record, dict) or not isinstance(record.get("name"), str):
        raise ValueError(
            f"reference {name_or_path} must be a JSON object with a 'name' (and solve_frames, solve_s, "
            "points: [{frames, train_return}])"
        )
    return record
