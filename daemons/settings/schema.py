"""The run config: one dataclass per TOML section, one documented field per key, loopback defaults.

The sections live in modules by theme (env_sections, training_sections, process_sections, selfplay_sections);
this module puts them together as RunConfig and is where the rest of Tandem imports them from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tandem.daemons.settings.env_sections import AtariSection, EnvSection, ModelSection, PixelsSection
from tandem.daemons.settings.option import option
from tandem.daemons.settings.process_sections import (
    PolicySection,
    SecuritySection,
    SupervisorSection,
    TrackingSection,
    TransportSection,
)
from tandem.daemons.settings.selfplay_sections import LeagueMemberSection, SelfPlaySection
from tandem.daemons.settings.training_sections import (
    DEFAULT_ALGORITHM,
    ActorsSection,
    AlgorithmSection,
    EvalSection,
    LearnerSection,
    ReplaySection,
    StopSection,
    default_algorithm,
    redefault,
)

__all__ = [
    "DEFAULT_ALGORITHM",
    "ActorsSection",
    "AlgorithmSection",
    "AtariSection",
    "EnvSection",
    "EvalSection",
    "LeagueMemberSection",
    "LearnerSection",
    "ModelSection",
    "PixelsSection",
    "PolicySection",
    "ReplaySection",
    "RunConfig",
    "RunSection",
    "SecuritySection",
    "SelfPlaySection",
    "StopSection",
    "SupervisorSection",
    "TrackingSection",
    "TransportSection",
    "default_algorithm",
    "option",
    "redefault",
]


@dataclass
class RunSection:
    """[run]: naming, where outputs go, seeding."""

    name: str = option("tandem", "Name of the run; used in the run directory and in status.")
    dir: str = option("runs/{name}", "Run directory for checkpoints, logs and metrics; {name} is replaced.")
    seed: int = option(0, "Base random seed; actor i uses seed + 1000 * (i + 1).", min=0)
    log_level: str = option("INFO", "Logging level of every daemon.", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


@dataclass
class RunConfig:
    """A whole run, as one TOML file describes it."""

    run: RunSection = field(default_factory=RunSection)
    env: EnvSection = field(default_factory=EnvSection)
    model: ModelSection = field(default_factory=ModelSection)
    # The class is the algorithm's own (a subclass with its keys), picked by algorithm.name when loading.
    algorithm: AlgorithmSection = field(default_factory=default_algorithm)
    actors: ActorsSection = field(default_factory=ActorsSection)
    learner: LearnerSection = field(default_factory=LearnerSection)
    eval: EvalSection = field(default_factory=EvalSection)
    stop: StopSection = field(default_factory=StopSection)
    supervisor: SupervisorSection = field(default_factory=SupervisorSection)
    transport: TransportSection = field(default_factory=TransportSection)
    security: SecuritySection = field(default_factory=SecuritySection)
    tracking: TrackingSection = field(default_factory=TrackingSection)
    selfplay: SelfPlaySection = field(default_factory=SelfPlaySection)
    # Empty: one policy, "default", plays every agent and uses [transport]'s learner ports.
    policies: dict[str, PolicySection] = field(default_factory=dict)
