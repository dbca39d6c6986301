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


def lazy_attribute(api: dict[str, str], owner: str, name: str) -> Any:
    """`name` of a lazily loaded API: `api` maps it to "module" (the same name there) or "module:attribute"."""
    if name not in api:
        raise AttributeError(f"module {owner!r} has no attribute {name!r}; it offers {', '.join(api)}")
    import importlib

    module, _, attribute = api[name].partition(":")
    return getattr(importlib.import_module(module), attribute or name)


def __getattr__(name: str) -> Any:
    return lazy_attribute(API, "tandem", name)
