"""The run config: one dataclass per TOML section, one documented field per key, loopback defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


def option(
    default: Any,
    doc: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: tuple[Any, ...] | None = None,
    above: float | None = None,
) -> Any:
    """A config field with its one-line doc and the bounds that make a value impossible."""
    meta = {"doc": doc, "min": min, "max": max, "choices": choices, "above": above}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


DEFAULT_ALGORITHM = "tandem.daemons.algorithms.registry:default_algorithm"  # what a config that names none runs


@dataclass
class RunSection:
    """[run]: naming, where outputs go, seeding."""

    name: str = option("tandem", "Name of the run; used in the run directory and in status.")
    dir: str = option("runs/{name}", "Run directory for checkpoints, logs and metrics; {name} is replaced.")
    seed: int = option(0, "Base random seed; actor i uses seed + 1000 * (i + 1).", min=0)
    log_level: str = option("INFO", "Logging level of every daemon.", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


@dataclass
class AtariSection:
    """[env.atari]: the standard Atari preprocessing around an ALE env (ale-py), for actors and the evaluator."""

    enabled: bool = option(
        False, "Wrap env.id (an 'ALE/Game-v5' id built with frameskip=1) in the preprocessing below."
    )
    noop_max: int = option(30, "Up to this many no-op actions after each reset (random starts).", min=0)
    frame_skip: int = option(4, "Each action repeats this many frames; the last two are max-pooled.", min=1)
    screen_size: int = option(84, "Frames are resized to screen_size x screen_size.", min=36)
    grayscale: bool = option(True, "Grayscale frames (one channel) instead of RGB.")
    frame_stack: int = option(4, "Observations are the last this many frames, [stack, H, W] uint8.", min=1)
    episodic_life: bool = option(True, "Training only: a lost life ends the learner's episode (the game goes on).")
    clip_rewards: bool = option(True, "Training only: rewards become their sign; reported returns stay the game's own.")
    fire_reset: bool = option(
        False,
        "Press FIRE (then UP) after each reset and, in training, after each lost life, in games that have a FIRE "
        "action, as Sample Factory's, cleanRL's and SB3's Atari wrappers do; the agent need not learn to serve.",
    )

    def frames_per_obs(self, obs_shape: tuple) -> int:
        """S when observations are this section's stacks of S > 1 frames ([S, ...]), else 1 (sent whole)."""
        stacked = self.enabled and self.frame_stack > 1 and tuple(obs_shape)[:1] == (self.frame_stack,)
        return self.frame_stack if stacked else 1


@dataclass
class PixelsSection:
    """[env.pixels]: frame skip, grayscale, resize and frame stack around any env whose observation is an image."""

    enabled: bool = option(
        False,
        "Wrap env.id (any env whose observation is an HxWxC or HxW uint8 Box of 0-255; for an ALE "
        "id use [env.atari]) in the preprocessing below.",
    )
    frame_skip: int = option(
        4, "Each action repeats this many frames, rewards summed; the last two are max-pooled (1: none).", min=1
    )
    screen_size: int = option(84, "Frames are resized to screen_size x screen_size.", min=8)
    grayscale: bool = option(
        True,
        "Grayscale frames [H, W]; false keeps colour, each frame [C, H, W] and a stack [stack*C, H, W] "
        "(sent whole: only single-channel stacks travel as frames).",
    )
    frame_stack: int = option(
        4, "Observations are the last this many frames, [stack, H, W] uint8 (channels first).", min=1
    )
    clip_rewards: bool = option(False, "Training only: rewards become their sign; reported returns stay the env's own.")

    def frames_per_obs(self, obs_shape: tuple) -> int:
        """S when observations are this section's stacks of S > 1 single-channel frames ([S, H, W]), else 1."""
        shape = tuple(obs_shape)
        stacked = self.enabled and self.frame_stack > 1 and len(shape) == 3 and shape[0] == self.frame_stack
        return self.frame_stack if stacked else 1


@dataclass
class EnvSection:
    """[env]: what each actor steps."""

    id: str = option("CartPole-v1", "A gymnasium id, or 'module:callable' returning an env.")
    kwargs: dict[str, Any] = option({}, "Keyword arguments passed to gymnasium.make or the callable.")
    num_envs: int = option(8, "Environments per actor (K); one batched inference steps all of them.", min=1, max=4096)
    max_episode_steps: int = option(0, "Truncate episodes after this many steps; 0 keeps the env's own limit.", min=0)
    api: str = option(
        "auto",
        "'gymnasium', PettingZoo 'aec' or 'parallel'; 'auto' tells them apart by what env.id builds.",
        choices=("auto", "gymnasium", "aec", "parallel"),
    )
    vector: str = option(
        "",
        "How an actor steps its K gymnasium envs: '' its own loop, 'sync'/'async' gymnasium's Sync/AsyncVectorEnv, 'envpool' EnvPool, 'ale' ale-py's Atari vector env.",
        choices=("", "sync", "async", "envpool", "ale"),
    )
    atari: AtariSection = field(default_factory=AtariSection)
    pixels: PixelsSection = field(default_factory=PixelsSection)

    @property
    def games(self) -> bool:
        """The envs report whole games in info (the Atari and pixel wrappers' GameReturn): returns are those."""
        return self.atari.enabled or self.pixels.enabled

    def frames_per_obs(self, obs_shape: tuple) -> int:
        """S when observations are [env.atari]'s or [env.pixels]'s stacks of S > 1 frames, else 1 (sent whole)."""
        return max(self.atari.frames_per_obs(obs_shape), self.pixels.frames_per_obs(obs_shape))


@dataclass
class ModelSection:
    """[model]: the network every policy of the run uses."""

    kind: str = option(
        "auto", "'auto' (MLP for vectors, Nature CNN for images), 'mlp', 'nature_cnn' or 'module:callable'."
    )
    hidden_sizes: list[int] = option([128, 128], "Hidden layer widths of the MLP.", min=1)
    activation: str = option("relu", "Activation of the MLP.", choices=("relu", "tanh", "elu"))
    init: str = option(
        "torch",
        "Initial weights of a built-in network: 'torch' (PyTorch's defaults), 'orthogonal' (gain sqrt(2) for "
        "hidden layers, as PPO implementations start their Atari CNNs; a policy's outputs x0.01) or "
        "'orthogonal_unit' (gain 1 for every layer, a policy's outputs too: Sample Factory's default).",
        choices=("torch", "orthogonal", "orthogonal_unit"),
    )
    core: str = option(
        "none",
        "A recurrent core after the network (on-policy algorithms): 'lstm' or 'gru' carry a state from step to "
        "step, so the policy can remember what one observation does not show; 'none' is feed-forward.",
        choices=("none", "lstm", "gru"),
    )
    core_size: int = option(
        64, "Width of the recurrent core's state (an LSTM keeps two of this width).", min=1, max=4096
    )

    def core_state_size(self) -> int:
        """Floats of recurrent state one env carries: 0 without a core, core_size for a GRU, twice that for an LSTM."""
        if self.core == "none":
            return 0
        return self.core_size * (2 if self.core == "lstm" else 1)


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


def default_algorithm() -> AlgorithmSection:
    """The [algorithm] of a config that names none: the default algorithm's section, with its defaults."""
    # Found by name, as the registry finds every built-in algorithm and a config finds a plug-in: the algorithms
    # sit above the settings (their sections are built from these fields), so the settings cannot import them.
    from tandem.daemons.settings.plugins import import_object

    return import_object(DEFAULT_ALGORITHM, "algorithm.name")().section()


@dataclass
class ActorsSection:
    """[actors]: how many actors, how they explore and how they ship transitions."""

    count: int = option(2, "Number of actor processes.", min=0, max=1024)
    unroll_length: int = option(16, "Steps per env in one TransitionBatch (T).", min=1, max=10000)
    epsilon: float = option(
        0.4,
        "(dqn) Ape-X base epsilon: env g of all G = count * env.num_envs actor envs explores with epsilon ** (1 + alpha * g / (G - 1)).",
        min=0.0,
        max=1.0,
    )
    epsilon_alpha: float = option(
        7.0, "(dqn) Ape-X alpha spreading the epsilons across every env of every actor.", min=0.0
    )
    epsilon_decay_steps: int = option(
        0, "(dqn) Env steps over which each actor's epsilon falls from 1.0 to its own; 0 starts there.", min=0
    )
    backlog_batches: int = option(
        16, "Batches an actor keeps while its learner is slow or gone; then the oldest is dropped.", min=1
    )
    join_unrolls: int = option(
        16,
        "(dqn) Consecutive unrolls waiting in the backlog that are sent as one message (fewer per-message costs at the learner); 1 sends each alone.",
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
    serve_bind: str = option(
        "tcp://127.0.0.1:0",
        "(serve) Where actor i's game socket binds (port 0: a free one; a fixed port P binds P + i); beyond loopback it needs --insecure. 'ipc://' alone: a Unix socket games/actor-N.sock in the run directory, for games on this machine (ipc://PATH: PATH, PATH-i for actor i). The address bound is in the run directory's games/actor-N.endpoint and in status.",
    )
    serve_batch_wait_ms: float = option(
        2.0,
        "(serve) Longest a game's request waits for a fuller inference batch (a batch also goes at once when every stream that stepped in the last 0.25 s and did not just end an episode is waiting, at serve_max_batch, or after a quarter of this wait without any step).",
        min=0.0,
    )
    serve_max_batch: int = option(256, "(serve) Most requests in one inference.", min=1, max=65536)
    serve_timeout_s: float = option(
        10.0,
        "(serve) A game silent this long (no step, no bye) is dropped: its open episodes end there (truncated).",
        above=0.0,
    )
    serve_max_streams: int = option(
        1024, "(serve) Most streams open at once over all games; a hello beyond it is refused (server_busy).", min=1
    )


@dataclass
class LearnerSection:
    """[learner]: replay, training pace, publishing and checkpoints of the policy's learner."""

    device: str = option("cpu", "Torch device: 'cpu', 'cuda', 'cuda:0', ...")
    remote: bool = option(
        False,
        "The learner runs elsewhere (`tandem learner --join`); the supervisor starts none and waits for it to register.",
    )
    replay_capacity: int = option(100_000, "(dqn) Transitions the replay ring holds (preallocated).", min=1)
    replay_min_size: int = option(1_000, "(dqn) Transitions needed before the first update.", min=1)
    samples_per_insert: float = option(
        4.0, "(dqn) Target ratio of sampled to inserted transitions (Reverb-style rate limit).", above=0.0
    )
    publish_interval_updates: int = option(
        10, "(dqn) Updates between two published weight versions; on-policy learners publish after every update.", min=1
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
    checkpoint_replay: bool = option(False, "(dqn) Also save the replay buffer in checkpoints.")
    torch_threads: int = option(1, "torch.set_num_threads in the learner.", min=1)
    intake_thread: bool = option(True, "Receive, check and insert batches on a thread of their own, beside training.")
    prefetch: bool = option(
        False,
        "(dqn) Sample the next replay batch (as tensors on the device, pinned and non-blocking on CUDA) while an update runs; no gain measured on a CPU.",
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
        "Learner processes that train this policy data-parallel (torch.distributed, Gloo): each takes its share of the "
        "actors, the replicas average gradients every optimizer step, and replica 0 publishes and checkpoints.",
        min=1,
        max=64,
    )
    collective_timeout_s: float = option(
        10.0,
        "(replicas > 1) Longest a replica waits in one collective (gradients, the agreement to update) for the "
        "others before it gives up and the group restarts; below supervisor.liveness_timeout_s.",
        above=0.0,
    )
    rendezvous_timeout_s: float = option(
        120.0, "(replicas > 1) Longest a replica waits for the others to form the group at its start.", above=0.0
    )
    replicas_trusted_network: bool = option(
        False,
        "(replicas > 1) Let replicas meet beyond loopback (replicas on several hosts, started with `tandem learner "
        "--rank`): their store and Gloo's gradient links are neither encrypted nor authenticated, so only on a "
        "network you trust.",
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


@dataclass
class SupervisorSection:
    """[supervisor]: heartbeats, liveness, start-up deadlines, restarts and memory limits of the daemons."""

    heartbeat_interval_s: float = option(1.0, "Seconds between two heartbeats of a daemon.", above=0.0)
    liveness_timeout_s: float = option(
        15.0, "A daemon silent for this long is hung: SIGTERM, SIGKILL after stop_grace_s, restart.", above=0.0
    )
    stop_grace_s: float = option(10.0, "Seconds between SIGTERM and SIGKILL when stopping a daemon.", above=0.0)
    max_concurrent_starts: int = option(2, "Actors allowed to build their environments at the same time.", min=1)
    start_token_lease_s: float = option(
        30.0,
        "A builder stuck this long in one build stage lends its start token to the next actor (it builds on until build_env_deadline_s); at most half of build_env_deadline_s is used, so the lease always fires before the deadline; 0: never.",
        min=0.0,
    )
    first_heartbeat_s: float = option(60.0, "Deadline from process start to its first heartbeat (imports).", above=0.0)
    build_env_deadline_s: float = option(
        120.0, "Deadline of each env build stage; a hung constructor gets its actor killed and restarted.", above=0.0
    )
    connect_deadline_s: float = option(60.0, "Deadline of the connect stage.", above=0.0)
    wait_weights_deadline_s: float = option(300.0, "Deadline for an actor's first weights.", above=0.0)
    backoff_initial_s: float = option(0.5, "First restart delay; doubles with each consecutive failure.", above=0.0)
    backoff_max_s: float = option(30.0, "Longest restart delay.", above=0.0)
    start_retries: int = option(3, "Consecutive failures before reaching running that make a process FATAL.", min=1)
    crash_loop_max: int = option(5, "Exits within crash_loop_window_s that make a process FATAL.", min=1)
    end_run_on_learner_fatal: bool = option(
        False,
        "End the whole run when any policy's learner is FATAL; by default a multi-policy run ends only when every learner is, and the other policies train on.",
    )
    crash_loop_window_s: float = option(60.0, "Window of the crash-loop count.", above=0.0)
    max_age_s: float = option(
        0.0,
        "Recycle an actor or the evaluator after it has run this long (0: never), as a planned restart that does not count toward the crash loop; learners are never recycled by age.",
        min=0.0,
    )
    backoff_reset_s: float = option(
        10.0,
        "A process that fails after running this long restarts after backoff_initial_s again (as supervisord's startsecs); its exit still counts toward the crash loop.",
        min=0.0,
    )
    actor_rss_limit_mb: int = option(
        0, "An actor above this resident memory is recycled (a planned restart, no failure); 0 is no limit.", min=0
    )
    learner_rss_limit_mb: int = option(
        0,
        "A learner above this resident memory checkpoints and is recycled (a planned restart, no failure); 0 is no limit.",
        min=0,
    )
    evaluator_rss_limit_mb: int = option(0, "The evaluator's memory limit (recycled above it); 0 is no limit.", min=0)
    metrics_port: int = option(
        0, "Port of the supervisor's HTTP endpoint (Prometheus /metrics, /healthz); 0 leaves it off.", min=0, max=65535
    )
    metrics_host: str = option(
        "127.0.0.1", "Address the metrics endpoint binds (loopback by default; it has no authentication)."
    )


@dataclass
class TransportSection:
    """[transport]: where learners bind and how sockets queue; the defaults stay on this machine."""

    host: str = option("127.0.0.1", "Address learners and the supervisor bind on (loopback by default).")
    transitions_port: int = option(0, "Learner's transitions PULL port; 0 picks a free one.", min=0, max=65535)
    weights_port: int = option(0, "Learner's weights PUB port; 0 picks a free one.", min=0, max=65535)
    snapshot_port: int = option(0, "Learner's snapshot ROUTER port; 0 picks a free one.", min=0, max=65535)
    control_port: int = option(0, "Supervisor's control ROUTER port; 0 picks a free one.", min=0, max=65535)
    linger_ms: int = option(500, "LINGER of every socket: longest wait to flush on close.", min=0, max=60_000)
    transitions_sndhwm_msgs: int = option(4, "Batches queued in an actor's PUSH socket.", min=1)
    transitions_rcvhwm_msgs: int = option(8, "Batches queued in the learner's PULL socket per actor.", min=1)
    transitions_buffer_kb: int = option(
        256, "Kernel send/receive buffer of transitions sockets (bounds stale data in flight).", min=4
    )
    weights_hwm_msgs: int = option(2, "Weight versions queued per subscriber (each is a whole model).", min=1, max=16)
    max_message_mb: int = option(2048, "Largest frame a receiver accepts; a larger one disconnects its sender.", min=1)
    heartbeat_ivl_ms: int = option(1000, "ZMTP heartbeat interval on TCP links.", min=1)
    heartbeat_timeout_ms: int = option(5000, "A TCP peer silent for this long is disconnected.", min=1)
    connect_timeout_ms: int = option(
        5000,
        "A TCP connect to another host not complete after this long is abandoned and made again (a link that "
        "was down must not keep a stale attempt for minutes).",
        min=1,
    )


@dataclass
class PolicySection:
    """[policies.NAME]: which agents of a multi-agent env this policy plays, and how its learner differs."""

    agents: list[str] = option(
        ["*"], "Agent names or shell patterns ('pursuer_*'); an agent plays the first policy that matches it."
    )
    algorithm: dict[str, Any] = option({}, "Keys of [algorithm] that differ for this policy.")
    model: dict[str, Any] = option({}, "Keys of [model] that differ for this policy.")
    learner: dict[str, Any] = option(
        {}, "Keys of [learner] that differ for this policy (device, replay_capacity, ...)."
    )
    transitions_port: int = option(0, "This policy's learner's transitions port; 0 picks a free one.", min=0, max=65535)
    weights_port: int = option(0, "This policy's learner's weights port; 0 picks a free one.", min=0, max=65535)
    snapshot_port: int = option(0, "This policy's learner's snapshot port; 0 picks a free one.", min=0, max=65535)


@dataclass
class SecuritySection:
    """[security]: CurveZMQ keys for links that leave this machine (`tandem keys`); empty: none, loopback only."""

    key_dir: str = option(
        "",
        "Directory of this host's keypair and allow-list (`tandem keys create`); empty: no keys, and a bind beyond loopback needs --insecure.",
    )
    key_name: str = option("host", "The keypair in key_dir this host's daemons use (KEY_NAME.key_secret).")
    supervisor_key: str = option(
        "",
        "The supervisor's public key (40 Z85 characters, or a .key file); empty: this host's own public key (the supervisor shares this host's keypair).",
    )
    curve_on_loopback: bool = option(
        False, "CurveZMQ on loopback TCP too (for tests, or a host whose other users are not trusted)."
    )


@dataclass
class TrackingSection:
    """[tracking]: experiment tracking beyond metrics.jsonl and TensorBoard (Weights & Biases)."""

    wandb: bool = option(
        False,
        "Log the run's curves (the same as TensorBoard's, against env steps) to Weights & Biases; needs `pip install 'tandem[tracking]'`.",
    )
    project: str = option("tandem", "The W&B project.")
    entity: str = option("", "The W&B entity (user or team); empty: your default entity.")
    run_name: str = option("", "The W&B run's name; empty: run.name.")
    mode: str = option(
        "online",
        "'online' uploads as it goes; 'offline' writes RUN_DIR/wandb only (`wandb sync` uploads it later).",
        choices=("online", "offline"),
    )


@dataclass
class LeagueMemberSection:
    """[selfplay.league.NAME]: a policy that learns by playing in the league, and whose pools its opponents come from."""

    opponents_from: list[str] = option(
        [],
        "Policies whose pools this policy's opponents are drawn from (each needs learner.pool_every > 0); empty: its own pool only.",
    )
    opponents: str = option(
        "",
        "How this policy's opponents are drawn: 'latest', 'uniform' or 'prioritized'; empty: selfplay.opponents.",
        choices=("", "latest", "uniform", "prioritized"),
    )
    actors: int = option(1, "How many of the run's actors play this policy's learning seat.", min=1)


@dataclass
class SelfPlaySection:
    """[selfplay]: a policy plays against pooled earlier versions of itself in multi-agent games."""

    enabled: bool = option(
        False,
        "In each game one seat (drawn anew per episode) plays the learning policy and is trained on; every other seat it plays is an opponent drawn from its learner's pool (learner.pool_every > 0).",
    )
    policy: str = option(
        "",
        "The learning policy (a name under [policies]); empty: the run's first policy. With a league: the member the evaluator measures (empty: the first).",
    )
    opponents: str = option(
        "prioritized",
        "How an episode's opponent is drawn from the pool: 'latest', 'uniform', or 'prioritized' (those the learning side loses to most, often).",
        choices=("latest", "uniform", "prioritized"),
    )
    opponent_moves: str = option(
        "sampled",
        "How a pooled opponent picks its moves: 'sampled' from its policy, as the learning seat does, or 'greedy' (its most likely move, as the evaluator plays): a past version then always plays what it knew, so a threat or a win left open is punished whenever that version saw it.",
        choices=("sampled", "greedy"),
    )
    opponent_nets: int = option(
        8, "Pooled versions an actor holds loaded at once (least recently used dropped first).", min=1, max=1024
    )
    active_opponents: int = option(
        1,
        "Pooled versions an actor's new episodes are spread over at a time: each distinct opponent costs one more batched inference per step (2 cost 20% of an actor's steps/s on Connect Four).",
        min=1,
        max=64,
    )
    games_per_draw: int = option(
        256,
        "Games an actor plays before it draws the next opponent (by `opponents`) to replace its oldest active one.",
        min=1,
    )
    league: dict[str, LeagueMemberSection] = option(
        {},
        "Several learning policies sharing pools (an AlphaStar-style league): one table per learning policy, which plays every seat its agents patterns match; actors are split among them in this order. Empty: selfplay.policy alone.",
    )
    eval_opponent: str = option(
        "random",
        "Whom the evaluator's greedy learning policy plays, its return being the win rate (a draw counts half): 'random' (a uniformly random legal action) or 'module:callable' (observations [B, D] -> B actions).",
    )
    scripted_opponent: str = option(
        "",
        "A fixed player mixed into the training games: 'random' or 'module:callable' (as eval_opponent); its games are counted apart and not rated. Empty: none.",
    )
    scripted_share: float = option(
        0.0,
        "Share of new episodes in which selfplay.scripted_opponent plays the opponents' seats instead of a pooled version.",
        min=0.0,
        max=1.0,
    )


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
