"""The sections of training: [algorithm] (the keys every algorithm shares), [actors], [learner], [eval] and [stop]."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.option import option

if TYPE_CHECKING:
    from tandem.daemons.settings.schema import RunConfig

DEFAULT_ALGORITHM = "tandem.daemons.algorithms.registry:default_algorithm"  # what a config that names none runs


def redefault(section: type, key: str, default: Any) -> Any:
    """Field `key` of `section` with another default and the same doc and bounds (a subclass's own default)."""
    meta = section.__dataclass_fields__[key].metadata
    bounds = {name: meta[name] for name in ("min", "max", "choices", "above")}
    return option(default, meta["doc"], **bounds)


@dataclass
class AlgorithmSection:
    """[algorithm]: the learning rule; `name` picks it, and each algorithm adds keys of its own to these."""

    name: str = option(
        "",
        "Algorithm the learner runs: a built-in one (the configuration reference lists each with its own keys) or 'package.module:NAME', an AlgorithmSpec of your own.",
    )
    gamma: float = option(0.99, "Discount factor.", min=0.0, max=1.0)
    learning_rate: float = option(1e-3, "Adam learning rate.", above=0.0)
    batch_size: int = option(
        128, "Transitions per update (on-policy: whole unrolls are gathered until there are this many).", min=1
    )
    max_grad_norm: float = option(10.0, "Gradient norm clip; 0 turns clipping off.", min=0.0)

    @classmethod
    def implied(cls, table: dict[str, Any]) -> dict[str, Any]:
        """Defaults that depend on what a config's table sets; they fill only the keys it leaves unset."""
        return {}

    # The algorithm trains a network with a recurrent core (model.core): it sends each unroll's initial state
    # and runs the core over whole unrolls. An algorithm that does not says so, and model.core is refused.
    recurrent_core: ClassVar[bool] = False

    def check(self, config: RunConfig, where: str) -> None:
        """ConfigError for values each fine alone but impossible together; `where` prefixes keys ('policies.NAME.')."""

    def uniform_until_trained(self) -> bool:
        """Whether actors act uniformly at random while they hold the untrained weights (version 0); an algorithm
        that wants it says so here (SAC, with its `uniform_warmup` key), so nobody has to probe for a key."""
        return False


@dataclass
class ReplaySection(AlgorithmSection):
    """[algorithm] of an algorithm that learns from the built-in replay feed: the keys ReplayFeed reads."""

    n_step: int = option(3, "Steps summed into each return before bootstrapping.", min=1, max=100)
    prioritized: bool = option(False, "Prioritized replay through a sum-tree instead of uniform sampling.")
    priority_alpha: float = option(0.6, "How strongly priorities shape sampling (0 is uniform).", min=0.0, max=1.0)
    priority_beta: float = option(0.4, "Importance-sampling correction exponent.", min=0.0, max=1.0)

    def check(self, config: RunConfig, where: str) -> None:
        learner = config.learner
        if learner.replay_min_size > learner.replay_capacity:
            raise ConfigError(
                f"{where}learner.replay_min_size",
                f"{learner.replay_min_size} is more than "
                f"learner.replay_capacity ({learner.replay_capacity}): training would never start",
            )
        if self.batch_size > learner.replay_capacity:
            raise ConfigError(f"{where}algorithm.batch_size", "is larger than learner.replay_capacity")


def default_algorithm() -> AlgorithmSection:
    """The [algorithm] of a config that names none: the default algorithm's section, with its defaults."""
    # Found by name, as the registry finds every built-in algorithm and a config finds a plug-in: the algorithms
    # sit above the settings (their sections are built from these fields), so the settings cannot import them.
    from tandem.daemons.settings.plugins import import_object

    return import_object(DEFAULT_ALGORITHM, "algorithm.name")().section()


@dataclass
class ExploreSection:
    """[actors.explore]: (dqn) Ape-X exploration, an epsilon of its own for every env of every actor."""

    epsilon: float = option(
        0.4,
        "Ape-X base epsilon: env g of all G = count * env.num_envs actor envs explores with epsilon ** (1 + alpha * g / (G - 1)).",
        min=0.0,
        max=1.0,
    )
    epsilon_alpha: float = option(7.0, "Ape-X alpha spreading the epsilons across every env of every actor.", min=0.0)
    epsilon_decay_steps: int = option(
        0, "Env steps over which each actor's epsilon falls from 1.0 to its own; 0 starts there.", min=0
    )


@dataclass
class ServeSection:
    """[actors.serve]: (actors.mode = "serve") the action server that game processes connect to."""

    bind: str = option(
        "tcp://127.0.0.1:0",
        "Where actor i's game socket binds (port 0: a free one; a fixed port P binds P + i); beyond loopback it needs --insecure. 'ipc://' alone: a Unix socket games/actor-N.sock in the run directory, for games on this machine (ipc://PATH: PATH, PATH-i for actor i). The address bound is in the run directory's games/actor-N.endpoint and in status.",
    )
    batch_wait_ms: float = option(
        2.0,
        "Longest a game's request waits for a fuller inference batch (a batch also goes at once when every stream that stepped in the last 0.25 s and did not just end an episode is waiting, at max_batch, or after a quarter of this wait without any step).",
        min=0.0,
    )
    max_batch: int = option(256, "Most requests in one inference.", min=1, max=65536)
    timeout_s: float = option(
        10.0,
        "A game silent this long (no step, no bye) is dropped: its open episodes end there (truncated).",
        above=0.0,
    )
    max_streams: int = option(
        1024, "Most streams open at once over all games; a hello beyond it is refused (server_busy).", min=1
    )


@dataclass
class ActorsSection:
    """[actors]: how many actors, how they explore and how they ship transitions."""

    count: int = option(2, "Number of actor processes.", min=0, max=1024)
    unroll_length: int = option(16, "Steps per env in one TransitionBatch (T).", min=1, max=10000)
    backlog_batches: int = option(
        16, "Batches an actor keeps while its learner is slow or gone; then the oldest is dropped.", min=1
    )
    join_unrolls: int = option(
        16,
        "(replay) Consecutive unrolls waiting in the backlog that are sent as one message (fewer per-message costs at the learner); 1 sends each alone.",
        min=1,
        max=1024,
    )
    weights_refresh_s: float = option(
        5.0, "Ask the snapshot socket when no new version arrived for this long.", above=0.0
    )
    relookup_after_s: float = option(
        20.0,
        "A learner silent this long (no weights, no snapshot reply) is looked up again at the supervisor, and followed if it moved.",
        above=0.0,
    )
    follow_pace: bool = option(
        True,
        "Send no faster than this actor's share of the insert budget its learner advertises with each weight version (no budget, or none lately: full speed).",
    )
    torch_threads: int = option(1, "torch.set_num_threads in each actor.", min=1)
    device: str = option("cpu", "Torch device the actors and the evaluator infer on: 'cpu', 'cuda', 'cuda:0', ...")
    mode: str = option(
        "env",
        "'env': each actor steps its own envs; 'serve': each actor is an action server that game processes connect to (the docs' guide: Games that run their own loop).",
        choices=("env", "serve"),
    )
    explore: ExploreSection = field(default_factory=ExploreSection)
    serve: ServeSection = field(default_factory=ServeSection)

    # Keys that moved into the tables above: a config that still names one is told where it went.
    moved: ClassVar[dict[str, str]] = {
        **{key: f"explore.{key}" for key in ("epsilon", "epsilon_alpha", "epsilon_decay_steps")},
        **{
            f"serve_{key}": f"serve.{key}" for key in ("bind", "batch_wait_ms", "max_batch", "timeout_s", "max_streams")
        },
    }


@dataclass
class LearnerSection:
    """[learner]: replay, training pace, publishing and checkpoints of the policy's learner."""

    device: str = option("cpu", "Torch device: 'cpu', 'cuda', 'cuda:0', ...")
    remote: bool = option(
        False,
        "The learner runs elsewhere (`tandem learner --join`); the supervisor starts none and waits for it to register.",
    )
    replay_capacity: int = option(100_000, "(replay) Transitions the replay ring holds (preallocated).", min=1)
    replay_min_size: int = option(1_000, "(replay) Transitions needed before the first update.", min=1)
    samples_per_insert: float = option(
        4.0, "(replay) Target ratio of sampled to inserted transitions (Reverb-style rate limit).", above=0.0
    )
    publish_interval_updates: int = option(
        10,
        "(replay) Updates between two published weight versions; on-policy learners publish after every update.",
        min=1,
    )
    pace_headroom: float = option(
        1.1,
        "The insert budget advertised to actors is this times the transitions/s the learner consumes while it trains; 0 advertises none.",
        min=0.0,
        max=100.0,
    )
    pace_credit: bool = option(
        True,
        "(on-policy) Pace the actors by a credit of one update's transitions per weight version instead of a rate, so that they send what the next update takes however long updates are; false paces by rate.",
    )
    max_lag: int = option(
        1000,
        "Batches whose behaviour version is more than this many versions old are dropped (on-policy: checked when trained on).",
        min=0,
    )
    checkpoint_interval_s: float = option(
        60.0, "Seconds between checkpoints (one is also written on SIGTERM).", above=0.0
    )
    checkpoint_every_updates: int = option(
        500,
        "Updates between checkpoints too, whichever of this and checkpoint_interval_s comes first: a kill loses at most this many (0: by time only); never so often that writing takes over 5% of the learner's time.",
        min=0,
    )
    checkpoint_replay: bool = option(False, "(replay) Also save the replay buffer in checkpoints.")
    torch_threads: int = option(1, "torch.set_num_threads in the learner.", min=1)
    intake_thread: bool = option(True, "Receive, check and insert batches on a thread of their own, beside training.")
    prefetch: bool = option(
        False,
        "(replay) Sample the next replay batch (as tensors on the device, pinned and non-blocking on CUDA) while an update runs; no gain measured on a CPU.",
    )
    pool_every: int = option(
        0,
        "Keep every weight version divisible by this as an opponent snapshot for self-play, in the learner's pool/ folder (0: keep none).",
        min=0,
    )
    pool_size: int = option(
        50, "Opponent snapshots kept at most (on disk; the oldest is removed first); with pool_every > 0.", min=1
    )
    augment: str = option(
        "",
        "(on-policy) 'module:callable' given each unroll the learner trains on (a TransitionBatch) and returning a "
        "transformed copy, e.g. the board mirrored, trained on beside it: twice the data per update for twice the "
        "update's work (empty: none).",
    )
    replicas: int = option(
        1,
        "Learner processes that train this policy data-parallel (torch.distributed: Gloo, or NCCL on GPUs): each takes "
        "its share of the actors, the replicas average gradients every optimizer step, and replica 0 publishes and "
        "checkpoints.",
        min=1,
        max=64,
    )
    collective_timeout_s: float = option(
        10.0,
        "(replicas > 1) Longest a replica waits in one collective (gradients, the agreement to update) for the "
        "others before it gives up and the group re-forms without the ones that did not come; below "
        "supervisor.liveness_timeout_s.",
        above=0.0,
    )
    reform_window_s: float = option(
        2.0,
        "(replicas > 1) After a replica is lost, how long the others wait for each other to ask for the next "
        "generation before they form it without the rest (a lost replica joins again when it is back).",
        above=0.0,
    )
    rendezvous_timeout_s: float = option(
        120.0, "(replicas > 1) Longest a replica waits for the others to form the group at its start.", above=0.0
    )
    replicas_trusted_network: bool = option(
        False,
        "(replicas > 1) Let replicas meet beyond loopback (replicas on several hosts, started with `tandem learner "
        "--rank`): their store and Gloo's or NCCL's gradient links are neither encrypted nor authenticated, so only on a "
        "network you trust.",
    )
    replica_backend: str = option(
        "auto",
        "(replicas > 1) torch.distributed backend of the group: 'nccl' keeps gradients on the GPUs (learners on "
        "CUDA devices), 'gloo' sends them through host memory; 'auto' is nccl where the learner trains on CUDA "
        "and NCCL is built in, gloo otherwise.",
        choices=("auto", "gloo", "nccl"),
    )
    allreduce_overlap: bool = option(
        True,
        "(replicas > 1) Reduce each bucket of gradients as soon as backward has made it, while backward computes "
        "the rest (false: one all-reduce of every gradient after backward).",
    )
    allreduce_bucket_kb: int = option(
        1024,
        "(replicas > 1) Size of one bucket of gradients reduced together (float32 KiB): smaller buckets start "
        "sooner, larger ones cost fewer collectives.",
        min=1,
    )
    replica_check_every: int = option(
        100,
        "(replicas > 1) Updates between two comparisons of the replicas' weights (a checksum each); a mismatch "
        "is counted and replica 0's weights are copied to the others (0: never compare).",
        min=0,
    )


@dataclass
class EvalSection:
    """[eval]: the greedy evaluator, an actor that explores not and pushes nothing."""

    enabled: bool = option(True, "Run an evaluator process beside the actors.")
    window_episodes: int = option(20, "Episodes averaged into the evaluation return of a version.", min=1)
    num_envs: int = option(4, "Environments the evaluator steps.", min=1)
    epsilon: float = option(
        0.0,
        "Exploration of the evaluator (0 is greedy; on-policy: the chance of a sampled action instead of the most likely).",
        min=0.0,
        max=1.0,
    )
    interval_s: float = option(
        0.5, "Least time from the start of one evaluation round to the next (CPU left to training).", min=0.0
    )
    max_cpu_share: float = option(
        0.1,
        "Most of the machine's cores the evaluator takes on average: after each round it waits until its CPU since the round began is within this share (0.1 of 2 cores: a fifth of one; on 10 or more cores no wait beyond interval_s).",
        above=0.0,
        max=1.0,
    )


@dataclass
class StopSection:
    """[stop]: `tandem up` ends with exit code 0 when any set condition is met."""

    eval_return: float | None = option(None, "Stop when the evaluator's mean return reaches this.")
    mean_return: float | None = option(None, "Stop when the mean of the last 100 training episodes reaches this.")
    env_steps: int | None = option(
        None, "Stop after this many env steps over all actors; a resumed run's earlier starts count too.", min=1
    )
    seconds: float | None = option(None, "Stop after this many seconds of this start.", above=0.0)
