"""Puts a config's problems in the order their keys appear in its file, so a person fixes them top to bottom."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from tandem.daemons.settings.fields import ConfigError

KEY = re.compile(r"[A-Za-z_][\w-]*(?:\.[\w-]+)*")  # a dotted key at the start of a problem's line


class FileOrder:
    """The positions of a parsed TOML file's keys (taken when made: loading adds defaults to the tables)."""

    def __init__(self, data: dict[str, Any]):
        self.data = copy.deepcopy(data)

    def position(self, key: str) -> tuple[int, ...]:
        """Where `key` ('actors.count', 'model.hidden_sizes[1]') is: a key the file does not hold goes after
        its section's keys (a problem of relations names a key the file may leave to its default)."""
        node: Any = self.data
        place: list[int] = []
        for part in key.split(".") if key else []:
            name = part.split("[", 1)[0]
            if not isinstance(node, dict) or name not in node:
                place.append(len(node) if isinstance(node, dict) else 0)
                break
            place.append(list(node).index(name))
            node = node[name]
        return tuple(place)

    def line_position(self, line: str) -> tuple[int, ...]:
        """The position of the key a one-line problem starts with ('env.id 'X': ...'); the end when none."""
        found = KEY.match(line)
        return self.position(found.group(0)) if found else (len(self.data),)

    def sorted(self, problems: Iterable[ConfigError]) -> list[ConfigError]:
        """`problems` in file order, each once (two checks may find the same one); a stable sort: problems of
        one key keep the order in which they were found."""
        unique = list({str(problem): problem for problem in problems}.values())
        return sorted(unique, key=lambda problem: self.position(problem.key))
