"""Prometheus metric families built from a published snapshot of the supervisor's status (never its live tables)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tandem.daemons.supervisor.states import State

PROCESS_STATES = [s.value for s in State] + ["REMOTE", "REMOTE-LOST"]
# (metric, kind, help, key in a process row, scale)
PROCESS_SERIES = [
    ("tandem_process_restarts", "counter", "Restarts of the process (planned recycles excluded).", "restarts", 1),
    ("tandem_process_recycles", "counter", "Planned restarts (memory limit, max_age_s).", "recycles", 1),
    ("tandem_process_rss_bytes", "gauge", "Resident memory from the last heartbeat.", "rss_mb", 2**20),
    ("tandem_process_cpu_percent", "gauge", "CPU use from the last heartbeat.", "cpu_percent", 1),
    ("tandem_process_heartbeat_age_seconds", "gauge", "Seconds since the last heartbeat.", "heartbeat_age_s", 1),
    ("tandem_process_version", "gauge", "Weight version the process holds.", "version", 1),
    ("tandem_process_lag_versions", "gauge", "The learner's mean policy lag, in versions.", "lag", 1),
    ("tandem_process_dropped", "counter", "Batches the process dropped (actors) or refused (learner).", "dropped", 1),
]
# (metric, kind, help, counter name in the heartbeat, role that reports it)
COUNTER_SERIES = [
    ("tandem_process_env_steps", "counter", "Env steps of the process's current incarnation.", "env_steps", "actor"),
    ("tandem_process_updates", "counter", "Updates of the learner's current incarnation.", "updates", "learner"),
]
POLICY_PREFIX = "tandem_policy_"
# (metric, kind, help, key): a tandem_policy_* series has a sample per policy, from its line in status; the others
# one for the run, from the figures (and are left out while the figure is unknown)
SNAPSHOT_SERIES = [
    ("tandem_policy_version", "gauge", "The policy's weight version.", "version"),
    ("tandem_policy_updates", "counter", "The policy's updates.", "updates"),
    ("tandem_policy_updates_per_second", "gauge", "The policy's updates per second.", "updates_per_s"),
    ("tandem_policy_replay_fill", "gauge", "Transitions in the policy's replay.", "replay_fill"),
    ("tandem_policy_lag_versions", "gauge", "The policy's mean lag, in versions.", "lag"),
    ("tandem_policy_dropped_by_learner", "counter", "Batches the learner refused.", "dropped_by_learner"),
    ("tandem_policy_dropped_by_actors", "counter", "Batches actors dropped for the policy.", "dropped_by_actors"),
    ("tandem_policy_eval_return", "gauge", "The evaluator's mean return of the policy.", "eval_return"),
    ("tandem_policy_rating", "gauge", "Self-play: the policy's OpenSkill rating (mu).", "rating"),
    ("tandem_policy_pool_win_rate", "gauge", "Self-play: the policy's recent score against its pool.", "pool_win_rate"),
    ("tandem_env_steps", "counter", "Env steps of the run (restarted actors' earlier steps included).", "env_steps"),
    ("tandem_env_steps_per_second", "gauge", "Env steps per second of the run.", "env_steps_per_s"),
    ("tandem_updates_per_second", "gauge", "Updates per second of every learner.", "updates_per_s"),
    ("tandem_episodes", "counter", "Training episodes reported.", "episodes"),
    ("tandem_mean_return_100", "gauge", "Mean return of the last 100 training episodes.", "mean_return_100"),
    ("tandem_eval_return", "gauge", "The evaluator's mean return.", "eval_return"),
]


def family(kind: str, name: str, doc: str, labels: list[str]):
    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    return cls(name, doc, labels=labels)


def number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def series(
    kind: str, name: str, doc: str, labels: list[str], samples: Iterable[tuple[list[str], object]], scale: float = 1
):
    """A family with a sample for each (label values, value) whose value is a number, times `scale`."""
    metric = family(kind, name, doc, labels)
    for values, value in samples:
        if (sample := number(value)) is not None:
            metric.add_metric(values, sample * scale)
    return metric


class SnapshotCollector(Collector):
    """Reads whatever snapshot `get()` returns at scrape time: a dict the main loop built and no longer touches."""

    def __init__(self, get: Callable[[], dict | None]):
        self.get = get

    def collect(self) -> Iterator:
        snapshot = self.get()
        if snapshot is None:
            return
        status, figures = snapshot["status"], snapshot["figures"]
        run = str(status.get("run", ""))
        yield from self._processes(run, status["processes"])
        for name, kind, doc, key in SNAPSHOT_SERIES:
            if name.startswith(POLICY_PREFIX):
                lines = status["policies"]
                yield series(kind, name, doc, ["run", "policy"], [([run, p["policy"]], p.get(key)) for p in lines])
            elif number(figures.get(key)) is not None:
                yield series(kind, name, doc, ["run"], [([run], figures[key])])
        unhealthy = family(
            "gauge",
            "tandem_unhealthy_processes",
            "Processes FATAL, hung or failing disk writes (healthz is 503 above 0).",
            ["run"],
        )
        unhealthy.add_metric([run], float(len(status["unhealthy"])))
        yield unhealthy
        dropped = family(
            "counter", "tandem_supervisor_dropped", "Control messages the supervisor dropped.", ["run", "reason"]
        )
        for reason, count in sorted(status.get("dropped", {}).items()):
            dropped.add_metric([run, reason], float(count))
        yield dropped

    @staticmethod
    def _processes(run: str, rows: list[dict]) -> Iterator:
        labels = ["run", "process", "role"]
        state = family(
            "gauge", "tandem_process_state", "1 for the state the process is in, 0 for the others.", labels + ["state"]
        )
        hung = family("gauge", "tandem_process_hung", "1 while the process is alive but silent too long.", labels)
        for row in rows:
            for value in PROCESS_STATES + ([row["state"]] if row["state"] not in PROCESS_STATES else []):
                state.add_metric([run, row["name"], row["role"], value], 1.0 if row["state"] == value else 0.0)
            hung.add_metric([run, row["name"], row["role"]], 1.0 if row["hung"] else 0.0)
        yield state
        yield hung
        for name, kind, doc, key, scale in PROCESS_SERIES:
            yield series(kind, name, doc, labels, [([run, r["name"], r["role"]], r.get(key)) for r in rows], scale)
        for name, kind, doc, key, role in COUNTER_SERIES:
            counted = [([run, r["name"], r["role"]], r["counters"].get(key)) for r in rows if r["role"] == role]
            yield series(kind, name, doc, labels, counted)
