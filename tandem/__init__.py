"""Tandem: a reinforcement-learning training runtime (actors, learners, an evaluator and a supervisor).

The one name Tandem installs. Its parts live in `tandem.daemons` (the processes), `tandem.protocol` (the
wire) and `tandem.client` (the CLI, benchmarks, fault drills and the API below). The API for trained
policies is here, imported on first use so that `import tandem` loads no torch:

    from tandem import load_policy, export_policy, load_exported
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it; looked up on first use (PEP 562).
API = {
    "load_policy": "tandem.client.api.policy",
    "load_exported": "tandem.client.api.export",
    "export_policy": "tandem.client.api.export",
    "TrainedPolicy": "tandem.client.api.trained",
    "PolicyError": "tandem.client.api.trained",
}
__all__ = list(API)


def __getattr__(name: str) -> Any:
    if name not in API:
        raise AttributeError(f"module 'tandem' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(API[name]), name)
