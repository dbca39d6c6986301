"""Checkpoints on disk: atomic versioned writes, keep-N pruning, and weights-only loading with fallback."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{12})\.pt$")
TEMP_PREFIX = ".ckpt-"
TEMP_SUFFIX = ".tmp"
PLAIN_TYPES = (type(None), bool, int, float, str, bytes, torch.Tensor, torch.Size, torch.dtype)


def checkpoint_path(directory: Path, version: int) -> Path:
    return Path(directory) / f"ckpt-{version:012d}.pt"


def check_plain(value: Any, where: str = "state") -> None:
    """TypeError naming the first value torch.load(weights_only=True) could not read back (numpy arrays included).

    Callers convert numpy arrays with `torch.from_numpy(array)` before saving.
    """
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, (str, int)):
                    raise TypeError(f"{path} has a key of type {type(key).__name__}; use str or int keys")
                stack.append((child, f"{path}[{key!r}]"))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
        elif not isinstance(item, PLAIN_TYPES):
            hint = "; convert it with torch.from_numpy" if type(item).__module__ == "numpy" else ""
            raise TypeError(
                f"{path} is a {type(item).__module__}.{type(item).__name__}, which weights-only loading refuses{hint}"
            )


def checkpoint_files(directory: Path) -> list[tuple[int, Path]]:
    """Finished checkpoints in `directory` as (version, path), oldest first; temp files never match."""
    try:
        entries = list(Path(directory).iterdir())
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), p) for p in entries if (m := CHECKPOINT_NAME.match(p.name)) and p.is_file()]
    return sorted(found)


def fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(directory: Path, state: dict, keep: int = 3) -> Path:
    """Write `state` as ckpt-<state["version"]:012d>.pt atomically, then keep only the newest `keep` checkpoints.

    `state` holds tensors, numbers, strings, bools, None, lists, tuples and dicts only, so that loading never
    needs to run code: numpy arrays must be converted by the caller (`torch.from_numpy`); TypeError otherwise.
    The file is written to a temp file in the same directory, flushed and fsynced, renamed over the final
    name and the directory fsynced, so a crash leaves either the old set of files or the new one. One
    directory has one writer: leftover temp files of crashed writes are removed here.
    """
    version = state.get("version")
    if type(version) is not int or version < 0:
        raise ValueError(f"state['version'] must be an int >= 0, got {version!r}")
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    check_plain(state)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, version)
    write_atomic(final, state, TEMP_PREFIX)
    prune(directory, keep, final)
    return final


def write_atomic(final: Path, state: dict, temp_prefix: str) -> None:
    """torch.save `state` as `final`: temp file, flush, fsync, rename, directory fsync; never a half file.

    Each writer of a directory has its own `temp_prefix`, so one never removes another's temp file as leftover.
    """
    fd, temp_name = tempfile.mkstemp(prefix=temp_prefix, suffix=TEMP_SUFFIX, dir=final.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, final)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_directory(final.parent)


def prune(directory: Path, keep: int, just_written: Path) -> None:
    """Remove all but the newest `keep` checkpoints (never the one just written) and leftover temp files."""
    files = checkpoint_files(directory)
    for _, path in files[:-keep]:
        if path != just_written:
            path.unlink(missing_ok=True)
    for path in directory.iterdir():
        if path.name.startswith(TEMP_PREFIX) and path.name.endswith(TEMP_SUFFIX):
            log.info("removing leftover temp file %s", path)
            path.unlink(missing_ok=True)


def load_latest_checkpoint(directory: Path) -> dict | None:
    """The newest checkpoint that loads, or None; unreadable ones are skipped with a warning.

    Loading uses torch.load(weights_only=True, map_location="cpu"): a file holding anything but tensors and
    plain containers is refused, and no code from the file runs.
    """
    for version, path in reversed(checkpoint_files(directory)):
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a torn, corrupt or hostile file: pickle, zip and torch raise many types
            log.warning("skipping checkpoint %s: cannot load it (%s: %s)", path, type(exc).__name__, exc)
            continue
        if not isinstance(state, dict):
            log.warning("skipping checkpoint %s: holds a %s, not a dict", path, type(state).__name__)
            continue
        if state.get("version") != version:
            log.warning("checkpoint %s holds version %r, not the one in its name", path, state.get("version"))
        return state
    return None
