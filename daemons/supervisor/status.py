"""What `tandem status` shows: a row per process and a line per policy, built from the supervisor's table."""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING, Any

from tandem.daemons.runtime.names import Role, learner_policy
from tandem.daemons.security.curve import curve_keys
from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.faults import disk_fault, unhealthy_reasons
from tandem.protocol.sockets import link_security

if TYPE_CHECKING:  # the supervisor builds these helpers' arguments; they never import it at run time
    from tandem.daemons.supervisor.supervisor import Supervisor


def process_row(sup: Supervisor, name: str, now: float) -> dict[str, Any]:
    rec = sup.records[name]
    beat = sup.beats.get(name)
    counters = dict(beat.counters) if beat else {}
    beat_age = now - sup.beat_times[name] if name in sup.beat_times else None
    hung = states.is_alive(rec) and beat_age is not None and beat_age > sup.heartbeat_policy.liveness_timeout_s
    rate_key = "updates" if rec.role == Role.LEARNER else "env_steps"
    return {
        "name": name,
        "role": rec.role,
        "host": beat.host if beat else socket.gethostname(),
        "pid": rec.pid,
        "state": rec.state.value,
        "hung": hung,
        "stage": rec.stage if states.is_alive(rec) else rec.last_stage,
        "stage_s": round(now - rec.stage_since, 1) if states.is_alive(rec) and rec.stage else None,
        "uptime_s": round(now - rec.started_at, 1) if rec.started_at is not None and states.is_alive(rec) else None,
        "restarts": rec.restarts,
        "recycles": rec.recycles,
        "last_recycle": rec.last_recycle,
        "heartbeat_age_s": round(beat_age, 2) if beat_age is not None else None,
        "rss_mb": round(beat.rss_bytes / 2**20, 1) if beat else None,
        "cpu_percent": round(beat.cpu_percent, 1) if beat else None,
        "rate_per_s": rate_from(sup, name, rate_key),
        "rate_of": rate_key,
        "version": counters.get("version"),
        "lag": counters.get("lag_mean"),
        "dropped": counters.get("batches_dropped", counters.get("batches_over_ratio")),
        "exit_code": rec.last_exit_code,
        "last_error": rec.last_error,
        "fault": rec.fault,
        "counters": counters,
    }


def remote_state(sup: Supervisor, name: str, now: float) -> str:
    """REMOTE while a daemon started elsewhere heartbeats, REMOTE-LOST once silent for the liveness timeout."""
    age = now - sup.beat_times[name] if name in sup.beat_times else None
    return "REMOTE-LOST" if age is None or age > sup.heartbeat_policy.liveness_timeout_s else "REMOTE"


def state_summary(sup: Supervisor, now: float) -> str:
    """`supervising: 2 REMOTE, 1 REMOTE-LOST`: how many processes are in each state (systemd's STATUS=)."""
    counts: dict[str, int] = {}
    states_now = [rec.state.value for rec in sup.records.values()] + [remote_state(sup, n, now) for n in sup.remote]
    for state in states_now:
        counts[state] = counts.get(state, 0) + 1
    return "supervising: " + (", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no daemons yet")


def remote_row(sup: Supervisor, name: str, now: float) -> dict[str, Any]:
    """A daemon started elsewhere (another machine, systemd, tmux): watched through its heartbeats, not managed."""
    entry, beat = sup.remote[name], sup.beats.get(name)
    age = now - sup.beat_times[name] if name in sup.beat_times else None
    state = remote_state(sup, name, now)
    counters = dict(beat.counters) if beat else {}
    rate_key = "updates" if entry["role"] == Role.LEARNER else "env_steps"
    fault = disk_fault(counters) if state == "REMOTE" else ""
    return {
        "name": name,
        "role": entry["role"],
        "host": entry["host"],
        "pid": entry["pid"],
        "state": state,
        "hung": False,
        "stage": beat.stage if beat else "",
        "stage_s": round(beat.stage_elapsed_s, 1) if beat else None,
        "uptime_s": None,
        "restarts": 0,
        "recycles": 0,
        "last_recycle": "",
        "heartbeat_age_s": round(age, 2) if age is not None else None,
        "rss_mb": round(beat.rss_bytes / 2**20, 1) if beat else None,
        "cpu_percent": round(beat.cpu_percent, 1) if beat else None,
        "rate_per_s": rate_from(sup, name, rate_key),
        "rate_of": rate_key,
        "version": counters.get("version"),
        "lag": counters.get("lag_mean"),
        "dropped": counters.get("batches_dropped", counters.get("batches_over_ratio")),
        "exit_code": None,
        "last_error": "INSECURE: unauthenticated bind" if entry["insecure"] else fault,
        "fault": fault,
        "counters": counters,
        "insecure": entry["insecure"],
    }


def rate_from(sup: Supervisor, name: str, key: str) -> float | None:
    meter = getattr(sup, "rates", {}).get((name, key))
    return round(meter.rate(), 1) if meter else None


def actor_sum(sup: Supervisor, key: str, policy: str, single: bool) -> int | None:
    """A per-policy actor counter (`key.POLICY`; plain `key` in a one-policy run) summed over live actors."""
    values = [
        b.counters.get(f"{key}.{policy}", b.counters.get(key) if single else None)
        for b in sup.beats.values()
        if b.role == Role.ACTOR
    ]
    values = [v for v in values if v is not None]
    return int(sum(values)) if values else None


def actor_seconds(sup: Supervisor, key: str) -> float | None:
    """A per-actor time counter summed over live actors (an actor waits for every policy at once)."""
    values = [b.counters[key] for b in sup.beats.values() if b.role == Role.ACTOR and key in b.counters]
    return round(sum(values), 1) if values else None


def policy_return(sup: Supervisor, policy: str, single: bool) -> float | None:
    """The evaluator's return for the policy, else None."""
    beat = sup.beats.get("evaluator")
    if beat is None:
        return None
    return beat.counters.get(f"eval_return.{policy}", beat.counters.get("eval_return") if single else None)


def policy_lines(sup: Supervisor, now: float) -> list[dict[str, Any]]:
    lines = []
    learners = [(n, r) for n, r in sup.records.items() if r.role == Role.LEARNER]
    learners += [(n, None) for n, e in sup.remote.items() if e.get("role") == Role.LEARNER]
    single = len({learner_policy(name) for name, _ in learners}) <= 1  # replicas of one policy are one policy
    for name, rec in learners:
        c = dict(sup.beats[name].counters) if name in sup.beats else {}
        entry = next((e for e in sup.registry.values() if e["name"] == name), {})
        policy = learner_policy(name)
        learner_dropped = [
            c.get(k) for k in ("batches_over_ratio", "unrolls_dropped_full", "batches_stale", "batches_malformed")
        ]
        lines.append(
            {
                "policy": policy,
                "learner": name,
                "state": rec.state.value if rec is not None else "REMOTE",
                "insecure": entry.get("insecure", False),
                # how its three sockets are reached: curve, loopback or insecure (unauthenticated beyond loopback)
                "link": entry.get("link") or ("insecure" if entry.get("insecure") else None),
                "version": c.get("version"),
                "updates": c.get("updates"),
                "updates_per_s": rate_from(sup, name, "updates"),
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
    rows = [process_row(sup, name, now) for name in sup.records]
    rows += [remote_row(sup, name, now) for name in sup.remote]
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
