"""An algorithm from outside the package for the tests: APPO under another name, with one key of its own.

A config picks it with `algorithm.name = "tests.daemons.plugin_algorithm:WRAPPED"`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tandem.algorithms import APPO, AlgorithmSection, APPOSection, ConfigError, RunConfig, option, redefault

PATH = "tests.daemons.plugin_algorithm:WRAPPED"


@dataclass
class WrappedSection(APPOSection):
    """[algorithm] of the tests' wrapped APPO: APPO's keys and one of its own."""

    name: str = redefault(AlgorithmSection, "name", PATH)
    epochs: int = redefault(APPOSection, "epochs", 2)
    warmup_updates: int = option(0, "Updates before this algorithm's own rule starts (a key only it has).", min=0)

    def check(self, config: RunConfig, where: str) -> None:
        super().check(config, where)
        if self.warmup_updates > 100:
            raise ConfigError(f"{where}algorithm.warmup_updates", "more than 100 is surely a mistake")


WRAPPED = dataclasses.replace(APPO, name="wrapped_appo", section=WrappedSection)
NOT_A_SPEC = 3
