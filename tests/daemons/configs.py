"""Run configs for tests that build an algorithm's learner or policy directly: the sections they set, a seed."""

from __future__ import annotations

import dataclasses
from typing import Any

from tandem.daemons.settings.schema import RunConfig


def run_config(seed: int | None = 0, **sections: Any) -> RunConfig:
    """RunConfig() with the given sections (model=ModelSection(...), algorithm=DQNSection(...)) and run.seed."""
    config = dataclasses.replace(RunConfig(), **sections)
    return seeded(config, seed)


def seeded(config: RunConfig, seed: int | None) -> RunConfig:
    return dataclasses.replace(config, run=dataclasses.replace(config.run, seed=seed))
