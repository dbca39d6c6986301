"""The command-line surface: the `tandem` CLI and its display; light imports, daemons do the work.

Also the Python API for trained policies, `from client import load_policy, export_policy, load_exported` (imported on
first use, so `import client` loads no torch).
"""

from __future__ import annotations

from typing import Any

# name -> the module that defines it; looked up on first use (PEP 562) so the CLI's start-up stays light.
LAZY = {"load_policy": "client.policy", "load_exported": "client.export", "export_policy": "client.export",
        "TrainedPolicy": "client.trained", "PolicyError": "client.trained"}
__all__ = list(LAZY)


def __getattr__(name: str) -> Any:
    if name not in LAZY:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(LAZY[name]), name)
