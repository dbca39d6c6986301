"""What the built-in AlgorithmSpecs share: a learner and a policy built from the classes a spec's function imports
when called (so a spec's module imports no torch), the replay feed, and the spec of an algorithm trained from it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.spec import AlgorithmSpec, LearnerFactory, PolicyFactory

if TYPE_CHECKING:
    from tandem.daemons.algorithms.base import Feed
    from tandem.daemons.settings.schema import ReplaySection, RunConfig

# () -> (learner class, policy class): a spec's function that imports its torch half only when it is called
Classes = Callable[[], tuple[type, type]]


def learner_factory(classes: Classes, **options: Any) -> LearnerFactory:
    """make_learner: the learner class of `classes` on `device`, given `options` as keywords too."""

    def make_learner(config: RunConfig, obs_space: Any, action_space: Any, device: str, mask_size: int) -> Any:
        learner, _ = classes()
        return learner(config, obs_space, action_space, device=device, mask_size=mask_size, **options)

    return make_learner


def policy_factory(classes: Classes) -> PolicyFactory:
    """make_policy: the policy class of `classes` on actors.device."""

    def make_policy(config: RunConfig, obs_space: Any, action_space: Any, seed: int | None, mask_size: int) -> Any:
        _, policy = classes()
        return policy(config, obs_space, action_space, seed, mask_size, device=config.actors.device)

    return make_policy


def replay_feed(config: RunConfig, obs_space: Any, action_space: Any) -> Feed:
    """Transitions in a replay ring (n-step with algorithm.n_step), sampled at learner.samples_per_insert."""
    from tandem.daemons.feeds.replay_feed import ReplayFeed

    return ReplayFeed(config, obs_space, action_space)


def replay_spec(
    name: str,
    summary: str,
    section: type[ReplaySection],
    check_action_space: Callable[[Any], None],
    classes: Classes,
    **spec: Any,
) -> AlgorithmSpec:
    """A built-in algorithm that trains from the replay feed; `spec`: the rest of its AlgorithmSpec's fields."""
    return AlgorithmSpec(
        name=name,
        summary=summary,
        section=section,
        check_action_space=check_action_space,
        make_learner=learner_factory(classes),
        make_policy=policy_factory(classes),
        make_feed=replay_feed,
        on_policy=False,
        **spec,
    )
