"""Where the benchmarks find their default configs: the example configs, installed with Tandem as `tandem.examples`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def example_config(name: str) -> Path:
    """The path of an example config (`cartpole.toml`, ...), from a checkout or an installed Tandem alike."""
    return Path(str(resources.files("tandem.examples").joinpath(name)))
