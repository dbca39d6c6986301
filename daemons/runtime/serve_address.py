"""Where each action server binds its game socket, from `actors.serve.bind`; no sockets here (the supervisor
checks a config's addresses with this before it starts anything)."""

from __future__ import annotations

import os
from pathlib import Path

from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.settings.schema import RunConfig

IPC_PATH_MAX = 107  # bytes in a Unix socket's path (Linux: 108 with the NUL; macOS allows 103, and says so at bind)


def serve_endpoint(bind: str, index: int, games_dir: Path | None = None) -> str:
    """Actor `index`'s bind address: `tcp://H:0` -> a free port; `tcp://H:P` -> P + index; `ipc://X` -> X-index;
    `ipc://` alone -> a Unix socket `actor-<index>.sock` in `games_dir` (the run directory's games/)."""
    if bind.startswith("ipc://"):
        if bind == "ipc://":
            if games_dir is None:
                raise ValueError("actors.serve.bind 'ipc://' puts the socket in the run directory, not known here")
            path = str(games_dir.absolute() / f"actor-{index}.sock")
        else:
            path = bind.removeprefix("ipc://") + ("" if index == 0 else f"-{index}")
        if len(os.fsencode(path)) > IPC_PATH_MAX:
            raise ValueError(
                f"actors.serve.bind {bind!r} would put actor {index}'s socket at {path}, {len(os.fsencode(path))} "
                f"bytes, but a Unix socket's path has at most {IPC_PATH_MAX}: use a shorter path (for 'ipc://', "
                "a shorter run.dir) or tcp://127.0.0.1:0"
            )
        return f"ipc://{path}"
    host, sep, port = bind.removeprefix("tcp://").rpartition(":")
    if not bind.startswith("tcp://") or not sep or not (port == "*" or port.isdigit()):
        raise ValueError(
            f"actors.serve.bind {bind!r}: expected tcp://ADDRESS:PORT (0 for a free port), ipc://PATH or "
            "ipc:// (a socket in the run directory)"
        )
    if port in ("*", "0"):
        return f"tcp://{host}:*"
    if not 0 < int(port) + index <= 65535:
        raise ValueError(f"actors.serve.bind {bind!r}: port {int(port) + index} of actor {index} is out of range")
    return f"tcp://{host}:{int(port) + index}"


def endpoint_file(config: RunConfig, name: str) -> Path:
    """Where a serving actor writes the address it bound (games read it when the port was 0)."""
    return run_dir(config) / "games" / f"{name}.endpoint"
