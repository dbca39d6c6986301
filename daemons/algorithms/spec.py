"""The algorithm object: everything the config, the learner, the actors and the API need from one algorithm."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: this module stays importable without numpy, gymnasium or torch
    from tandem.daemons.algorithms.base import Algorithm, Feed, Policy
    from tandem.daemons.settings.schema import AlgorithmSection, RunConfig

# make_learner(config, obs_space, action_space, device, mask_size): the learner side, on `device`, with its
# initial weights seeded by run.seed. `mask_size` > 0: observations end with that many action-mask entries.
LearnerFactory = Callable[["RunConfig", Any, Any, str, int], "Algorithm"]
# make_policy(config, obs_space, action_space, seed, mask_size): the actor side on actors.device; `seed`
# drives its exploration and initial weights.
PolicyFactory = Callable[["RunConfig", Any, Any, "int | None", int], "Policy"]
# make_feed(config, obs_space, action_space): the learner's data path for this algorithm's updates.
FeedFactory = Callable[["RunConfig", Any, Any], "Feed"]


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm. A built-in one is defined in its own module and listed in `registry.BUILT_IN`; any
    other is named in the config as `algorithm.name = "package.module:NAME"`, NAME being one of these.
    Everything Tandem does with an algorithm goes through it:

        spec = find_algorithm(config.algorithm.name)    # config.algorithm is a spec.section
        spec.check_action_space(action_space)           # ValueError: it cannot act there
        learner = spec.make_learner(config, obs_space, action_space, device, mask_size)
        feed = spec.make_feed(config, obs_space, action_space)
        policy = spec.make_policy(config, obs_space, action_space, seed, mask_size)
        checkpoint["algorithm"][spec.acting_network]    # the weights its policy acts with

    The config is read by processes that never train (the CLI, the supervisor), so the module that
    defines a spec should not import torch at the top: the factories import what they build.
    """

    name: str  # algorithm.name of a built-in one; a plug-in's config names its path, and this is its name in messages
    summary: str  # one line: what it is (the configuration reference prints it)
    # Its [algorithm] keys: a subclass of AlgorithmSection (the shared keys) with its own keys and defaults
    section: type[AlgorithmSection]
    check_action_space: Callable[[Any], None]  # ValueError saying what it needs, for an action space it cannot use
    make_learner: LearnerFactory
    make_policy: PolicyFactory
    make_feed: FeedFactory
    acting_network: str  # the part of its learner's state_dict() that its policy runs (what weights() publishes)
    on_policy: bool  # trains on fresh unrolls (actors send each alone); False: on replayed transitions of any age
    epsilon_greedy: bool = False  # its policy explores epsilon-greedily; False: by sampling from its distribution
    dict_observations: bool = False  # it trains on Dict observations (one array per key); False: refused
    # Other sections' defaults it changes, e.g. {"learner": {"max_lag": 32}}; a config's own values win
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
