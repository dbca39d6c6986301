"""APPO and IMPALA as the config and the daemons see them: their names, [algorithm] keys and specs (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tandem.daemons.algorithms.factories import learner_factory, policy_factory
from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.schema import AlgorithmSection, RunConfig, option, redefault

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.learner import APPO as APPOLearner
    from tandem.daemons.algorithms.appo.policy import StochasticPolicy
    from tandem.daemons.algorithms.base import Feed

ON_POLICY_LEARNER = {"max_lag": 32}  # an unroll more than this many versions old is not worth a V-trace correction


@dataclass
class VtraceSection(AlgorithmSection):
    """[algorithm] keys of the V-trace actor-critics (APPO and IMPALA)."""

    recurrent_core: ClassVar[bool] = True

    learning_rate: float = redefault(AlgorithmSection, "learning_rate", 3e-4)
    batch_size: int = redefault(AlgorithmSection, "batch_size", 1024)
    vtrace_rho_clip: float = option(
        1.0, "V-trace rho-bar: clip of the importance weight in the targets and the policy gradient.", above=0.0
    )
    vtrace_c_clip: float = option(1.0, "V-trace c-bar: clip of the trace-cutting weights.", above=0.0)
    vtrace_lambda: float = option(
        0.95, "Mixes n-step targets like GAE's lambda (1.0 is IMPALA's V-trace).", min=0.0, max=1.0
    )
    value_coef: float = option(0.5, "Weight of the value loss.", min=0.0)
    entropy_coef: float = option(0.01, "Weight of the entropy bonus.", min=0.0)
    epochs: int = option(1, "Passes over each batch of unrolls.", min=1, max=100)
    minibatches: int = option(1, "Minibatches per pass; each holds whole unrolls.", min=1)
    normalize_advantages: bool = option(True, "Scale each minibatch's advantages to mean 0, std 1.")
    targets: str = option(
        "per_minibatch",
        "When V-trace targets and advantages are computed: 'per_minibatch' with the current weights before "
        "each step (IMPALA's form), 'per_update' once with the weights the update starts from (PPO's form; "
        "needed by minibatch_by = 'steps' and value_clip).",
        choices=("per_minibatch", "per_update"),
    )
    minibatch_by: str = option(
        "unrolls",
        "What a minibatch is drawn as: 'unrolls' (whole env columns, in order) or 'steps' (single steps "
        "shuffled over the whole batch: less correlated, as PPO does; needs targets = 'per_update').",
        choices=("unrolls", "steps"),
    )
    value_clip: float = option(
        0.0,
        "PPO's value clipping: a value moves at most this far from where the update started before its loss "
        "stops counting (in normalized units with normalize_returns); 0 is off. Needs targets = 'per_update'.",
        min=0.0,
    )
    normalize_returns: bool = option(
        True,
        "The value output is in units of the running mean and standard deviation of the value targets (Sample "
        "Factory's normalize_returns): one learning rate fits rewards of any scale, and the value loss cannot "
        "swamp the policy's gradient.",
    )
    normalize_obs: bool = option(
        False,
        "Vector observations are shifted and scaled by their running mean and standard deviation per feature, "
        "clipped at 10 (kept in the network, so actors and exports use the same statistics); the entity policy "
        "(attention) does the same per feature of each entity type over the entities present, as EntityGym's "
        "RogueNet does; images: see normalize_images.",
    )
    normalize_images: bool = option(
        True,
        "Image observations into a built-in CNN are shifted and scaled per pixel by their running mean and "
        "standard deviation after scaling to [0, 1], clipped at 5 (Sample Factory's normalize_input): the "
        "moving objects stand out of a static background from the first update (on Pong, -18.7 instead of "
        "-20.1 after 0.6M frames). A network of your own (model.kind = 'module:callable') gets raw pixels.",
    )
    adam_eps: float = option(1e-5, "Adam's epsilon.", above=0.0)
    learning_rate_decay_steps: int = option(
        0,
        "Decay the learning rate linearly to 0 over this many trained agent steps (each update counts "
        "batch_size), as Sample Factory's linear_decay and cleanRL's annealing do; 0 keeps it constant.",
        min=0,
    )
    entropy_decay_steps: int = option(
        0,
        "Decay entropy_coef linearly to 0 over this many trained agent steps (each update counts batch_size), as "
        "EntityGym's trainer anneals its entropy bonus: wide exploration early, a sharp policy at the end; 0 keeps "
        "it constant.",
        min=0,
    )
    reward_scale: float = option(
        1.0, "Rewards are multiplied by this before training (returns reported unscaled).", above=0.0
    )
    log_std_init: float = option(0.0, "(Box actions) Initial log standard deviation of the Gaussian policy.")
    state_dependent_std: bool = option(
        False, "(Box actions) The network outputs the log-std per state instead of one learned vector."
    )
    shared_torso: bool = option(
        False,
        "One network whose last layer gives the policy and the value (IMPALA's and Sample Factory's form: half "
        "the learner's compute of two separate networks).",
    )

    def check(self, config: RunConfig, where: str) -> None:
        if config.model.core != "none" and self.minibatch_by == "steps":
            raise ConfigError(
                f"{where}algorithm.minibatch_by",
                f"'steps' cannot train model.core = {config.model.core!r}: a recurrent core runs over whole "
                "unrolls in order; set algorithm.minibatch_by = 'unrolls'",
            )
        if self.targets == "per_update":  # the keys below need targets fixed at the update's start
            return
        if self.minibatch_by == "steps":
            raise ConfigError(
                f"{where}algorithm.minibatch_by",
                "'steps' needs algorithm.targets = 'per_update' (recomputed V-trace needs whole unrolls in order)",
            )
        if self.value_clip > 0:
            raise ConfigError(
                f"{where}algorithm.value_clip",
                "needs algorithm.targets = 'per_update' (the values "
                "it clips around are those the update starts from); with 'per_minibatch' set it to 0",
            )


@dataclass
class IMPALASection(VtraceSection):
    """[algorithm] of impala: the V-trace policy gradient, without a clipped objective."""

    name: str = redefault(AlgorithmSection, "name", "impala")
    max_grad_norm: float = redefault(AlgorithmSection, "max_grad_norm", 40.0)
    vtrace_lambda: float = redefault(VtraceSection, "vtrace_lambda", 1.0)


@dataclass
class APPOSection(VtraceSection):
    """[algorithm] of appo: PPO's clipped objective on V-trace targets."""

    name: str = redefault(AlgorithmSection, "name", "appo")
    max_grad_norm: float = redefault(AlgorithmSection, "max_grad_norm", 0.5)
    # targets once per update, single-step minibatches, value clipping: measured best on CartPole (docs/learning.md)
    targets: str = redefault(VtraceSection, "targets", "per_update")
    minibatch_by: str = redefault(VtraceSection, "minibatch_by", "steps")
    value_clip: float = redefault(VtraceSection, "value_clip", 0.2)
    clip_ratio: float = option(0.2, "PPO clip range of the ratio target/behaviour policy.", above=0.0)
    clip_anchor: str = option(
        "proximal",
        "(targets = 'per_update') What PPO's clipped ratio is taken against: 'proximal', the policy the update "
        "starts from (decoupled PPO: an unroll's lag behind it is weighted in by V-trace once), or "
        "'behaviour', the version that acted.",
        choices=("proximal", "behaviour"),
    )

    @classmethod
    def implied(cls, table: dict[str, Any]) -> dict[str, Any]:
        """A config asking for per-minibatch targets gets the plain values of the keys that need per-update ones."""
        if table.get("targets") == "per_minibatch":
            return {"minibatch_by": "unrolls", "value_clip": 0.0}
        return {}


def check_action_space(action_space: Any) -> None:
    from tandem.daemons.algorithms.distributions import ActionHead

    ActionHead(action_space)


def torch_classes() -> tuple[type[APPOLearner], type[StochasticPolicy]]:
    """The learner and the policy, imported when one is built (reading a config needs no torch)."""
    from tandem.daemons.algorithms.appo.learner import APPO as APPOLearner
    from tandem.daemons.algorithms.appo.policy import StochasticPolicy

    return APPOLearner, StochasticPolicy


def make_feed(config: RunConfig, obs_space: Any, action_space: Any) -> Feed:
    """A queue of whole unrolls in arrival order, `batch_size` transitions an update, lag checked at use."""
    from tandem.daemons.feeds.unroll_feed import UnrollFeed

    return UnrollFeed(config.algorithm.batch_size, config.learner.max_lag)


def vtrace_spec(name: str, summary: str, section: type[VtraceSection], clipped: bool) -> AlgorithmSpec:
    """APPO (`clipped`: PPO's objective) or IMPALA: one learner and policy, trained on fresh unrolls."""
    return AlgorithmSpec(
        name=name,
        summary=summary,
        section=section,
        check_action_space=check_action_space,
        make_learner=learner_factory(torch_classes, clipped=clipped),
        make_policy=policy_factory(torch_classes),
        make_feed=make_feed,
        acting_network="net",
        on_policy=True,
        dict_observations=True,
        defaults={"learner": ON_POLICY_LEARNER},
    )


APPO = vtrace_spec(
    "appo", "APPO: PPO's clipped objective on V-trace targets, trained on fresh unrolls.", APPOSection, clipped=True
)
IMPALA = vtrace_spec(
    "impala",
    "IMPALA: the V-trace policy gradient (no clipping), trained on fresh unrolls.",
    IMPALASection,
    clipped=False,
)
