"""The sections of running the processes: [supervisor], [transport], [policies.NAME], [security] and [tracking]."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tandem.daemons.settings.option import option


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
