"""What `tandem status` shows: a row per process and a line per policy, built from the supervisor's table."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tandem.daemons.runtime.names import Role, learner_policy
from tandem.daemons.runtime.reporter import TRAIN_PREFIX
from tandem.daemons.runtime.time_split import COUNTER_PREFIX
from tandem.daemons.security.curve import curve_keys
from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.faults import disk_fault, unhealthy_reasons
from tandem.protocol.sockets import link_security

if TYPE_CHECKING:  # the supervisor builds these helpers' arguments; they never import it at run time
    from tandem.daemons.supervisor.supervised import Supervised
    from tandem.daemons.supervisor.supervisor import Supervisor
    from tandem.protocol import Heartbeat


def heard(proc: Supervised, now: float) -> dict[str, Any]:
    """A row's figures from the process's heartbeats, read alike whoever started it."""
    beat, age = proc.beat, proc.heartbeat_age(now)
    counters = beat.counters if beat else {}
    rate_key = "updates" if proc.record.role == Role.LEARNER else "env_steps"
    return {
        "heartbeat_age_s": round(age, 2) if age is not None else None,
        "rss_mb": round(beat.rss_bytes / 2**20, 1) if beat else None,
        "cpu_percent": round(beat.cpu_percent, 1) if beat else None,
        "rate_per_s": proc.rate(rate_key),
        "rate_of": rate_key,
        "version": counters.get("version"),
        "lag": counters.get("lag_mean"),
        "dropped": counters.get("batches_dropped", counters.get("batches_over_ratio")),
    }


def process_row(sup: Supervisor, proc: Supervised, now: float) -> dict[str, Any]:
    """A daemon this supervisor started: its state machine's record and its heartbeats."""
    rec, beat, age = proc.record, proc.beat, proc.heartbeat_age(now)
    alive = states.is_alive(rec)
    return {
        "name": rec.name,
        "role": rec.role,
        "host": beat.host if beat else socket.gethostname(),
        "pid": rec.pid,
        "state": rec.state.value,
        "hung": alive and age is not None and age > sup.heartbeat_policy.liveness_timeout_s,
        "stage": rec.stage if alive else rec.last_stage,
        "stage_s": round(now - rec.stage_since, 1) if alive and rec.stage else None,
        "uptime_s": round(now - rec.started_at, 1) if rec.started_at is not None and alive else None,
        "restarts": rec.restarts,
        "recycles": rec.recycles,
        "last_recycle": rec.last_recycle,
        **heard(proc, now),
        "exit_code": rec.last_exit_code,
        "last_error": rec.last_error,
        "fault": rec.fault,
        "counters": dict(beat.counters) if beat else {},
    }


def remote_state(sup: Supervisor, proc: Supervised, now: float) -> str:
    """REMOTE while a daemon started elsewhere heartbeats, REMOTE-LOST once silent for the liveness timeout."""
    age = proc.heartbeat_age(now)
    return "REMOTE-LOST" if age is None or age > sup.heartbeat_policy.liveness_timeout_s else "REMOTE"


def state_of(sup: Supervisor, proc: Supervised, now: float) -> str:
    return proc.record.state.value if proc.managed else remote_state(sup, proc, now)


def state_summary(sup: Supervisor, now: float) -> str:
    """`supervising: 2 REMOTE, 1 REMOTE-LOST`: how many processes are in each state (systemd's STATUS=)."""
    counts: dict[str, int] = {}
    for proc in sup.processes.values():
        state = state_of(sup, proc, now)
        counts[state] = counts.get(state, 0) + 1
    return "supervising: " + (", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no daemons yet")


def remote_row(sup: Supervisor, proc: Supervised, now: float) -> dict[str, Any]:
    """A daemon started elsewhere (another machine, systemd, tmux): watched through its heartbeats, not managed."""
    beat = proc.beat
    state = remote_state(sup, proc, now)
    counters = dict(beat.counters) if beat else {}
    fault = disk_fault(counters) if state == "REMOTE" else ""
    return {
        "name": proc.name,
        "role": proc.record.role,
        "host": proc.host,
        "pid": proc.record.pid,
        "state": state,
        "hung": False,
        "stage": beat.stage if beat else "",
        "stage_s": round(beat.stage_elapsed_s, 1) if beat else None,
        "uptime_s": None,
        "restarts": 0,
        "recycles": 0,
        "last_recycle": "",
        **heard(proc, now),
        "exit_code": None,
        "last_error": "INSECURE: unauthenticated bind" if proc.insecure else fault,
        "fault": fault,
        "counters": counters,
        "insecure": proc.insecure,
    }


def beats(sup: Supervisor) -> list[Heartbeat]:
    """The last heartbeat of each process's current incarnation."""
    return [proc.beat for proc in sup.processes.values() if proc.beat is not None]


def actor_sum(sup: Supervisor, key: str, policy: str, single: bool) -> int | None:
    """A per-policy actor counter (`key.POLICY`; plain `key` in a one-policy run) summed over live actors."""
    values = [
        b.counters.get(f"{key}.{policy}", b.counters.get(key) if single else None)
        for b in beats(sup)
        if b.role == Role.ACTOR
    ]
    values = [v for v in values if v is not None]
    return int(sum(values)) if values else None


def actor_seconds(sup: Supervisor, key: str) -> float | None:
    """A per-actor time counter summed over live actors (an actor waits for every policy at once)."""
    values = [b.counters[key] for b in beats(sup) if b.role == Role.ACTOR and key in b.counters]
    return round(sum(values), 1) if values else None


def policy_return(sup: Supervisor, policy: str, single: bool) -> float | None:
    """The evaluator's return for the policy, else None."""
    evaluator = sup.processes.get("evaluator")
    beat = evaluator.beat if evaluator is not None else None
    if beat is None:
        return None
    return beat.counters.get(f"eval_return.{policy}", beat.counters.get("eval_return") if single else None)


def time_split(counters: Mapping[str, float]) -> dict[str, float] | None:
    """The learner's time shares (train_time_wait, ...) as {"wait": 0.1, ...}; None before its first window."""
    prefix = TRAIN_PREFIX + COUNTER_PREFIX
    shares = {k.removeprefix(prefix): v for k, v in counters.items() if k.startswith(prefix)}
    return shares or None


def replica_group(counters: Mapping[str, float]) -> dict[str, int] | None:
    """A replica's group as its heartbeat counts it; None for a lone learner (or before the group formed)."""
    if "replica_generation" not in counters:
        return None
    keys = {"generation": "replica_generation", "members": "replicas", "reforms": "replica_reforms"}
    group = {short: int(counters.get(key, 0)) for short, key in keys.items()}
    group["updates_lost"] = int(counters.get("replica_updates_lost", 0))
    return group


def policy_lines(sup: Supervisor, now: float) -> list[dict[str, Any]]:
    lines = []
    learners = [proc for proc in sup.processes.values() if proc.record.role == Role.LEARNER]
    single = len({learner_policy(proc.name) for proc in learners}) <= 1  # replicas of one policy are one policy
    for proc in learners:
        name = proc.name
        c = dict(proc.beat.counters) if proc.beat is not None else {}
        entry = next((e for e in sup.registry.values() if e.name == name), None)
        insecure = entry is not None and entry.insecure
        policy = learner_policy(name)
        learner_dropped = [
            c.get(k) for k in ("batches_over_ratio", "unrolls_dropped_full", "batches_stale", "batches_malformed")
        ]
        lines.append(
            {
                "policy": policy,
                "learner": name,
                "state": proc.record.state.value if proc.managed else "REMOTE",
                "insecure": insecure,
                # how its three sockets are reached: curve, loopback or insecure (unauthenticated beyond loopback)
                "link": (entry.link if entry is not None else "") or ("insecure" if insecure else None),
                "version": c.get("version"),
                "updates": c.get("updates"),
                "updates_per_s": proc.rate("updates"),
                "replay_fill": c.get("replay_fill"),
                "lag": c.get("lag_mean"),
                "last_checkpoint_age_s": c.get("checkpoint_age_s"),
                "dropped_by_learner": int(sum(v for v in learner_dropped if v is not None)) if c else None,
                "dropped_by_actors": actor_sum(sup, "batches_dropped", policy, single),
                # backpressure: the insert budget the learner advertises (0 = none), the time actors waited
                "pace_per_s": c.get("pace_per_s"),
                "pace_credit": c.get("pace_credit"),
                "paced_s": actor_seconds(sup, "paced_s"),
                "eval_return": policy_return(sup, policy, single),
                # self-play: the learning policy's rating and win rate against its pool (absent otherwise)
                "rating": c.get("train_rating"),
                "pool_win_rate": c.get("train_pool_win_rate"),
                "pool_size": c.get("pool_size"),
                # where the learner's loop spent its last second: waiting for data, preparing, computing, publishing
                "time_split": time_split(c),
                # a data-parallel replica's group (absent for a lone learner): its generation, its members, the
                # times it re-formed without a lost member or with a returning one, and the updates cut short then
                "group": replica_group(c),
            }
        )
    return lines


GAME_SERVER_KEYS = (
    "serve_port",
    "games",
    "streams",
    "serve_requests_per_s",
    "serve_batch_mean",
    "serve_latency_p50_ms",
    "serve_latency_p99_ms",
    "games_timed_out",
    "game_errors",
)


def game_servers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Actors in serve mode (their heartbeats carry serve_port): connected games, requests/s, batch, latency."""
    return [
        {"name": r["name"], **{key: r["counters"].get(key) for key in GAME_SERVER_KEYS}}
        for r in rows
        if r["role"] == Role.ACTOR and "serve_port" in r["counters"]
    ]


def status_data(sup: Supervisor, now: float) -> dict[str, Any]:
    rows = [(process_row if proc.managed else remote_row)(sup, proc, now) for proc in sup.processes.values()]
    reasons = unhealthy_reasons(rows, sup.faults)
    return {
        "run": sup.config.run.name,
        "supervisor_pid": os.getpid(),
        "time": time.time(),
        "stopping": sup.stopping,
        "processes": rows,
        "policies": policy_lines(sup, now),
        "control_link": link_security(sup.control_endpoint, curve_keys(sup.config)),
        "game_servers": game_servers(rows),
        "dropped": {"control_malformed": sup.view.malformed, "heartbeats_unknown": sup.view.unknown_heartbeats},
        # a daemon started elsewhere that has gone silent counts too (one never heard from may still be starting)
        "unhealthy": list(reasons),
        "unhealthy_reasons": reasons,
    }
