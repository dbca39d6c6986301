"""What `tandem up` shows and stops on, from heartbeats and episode reports (pure: no sockets, an explicit now)."""

from __future__ import annotations

from collections import deque

from tandem.daemons.runtime.names import Role, learner_policy, replica_rank
from tandem.daemons.runtime.rate_meter import RateMeter
from tandem.daemons.runtime.reporter import train_diagnostics
from tandem.daemons.runtime.stop_rule import stop_reason
from tandem.daemons.settings.schema import StopSection
from tandem.daemons.supervisor.segments import Earlier
from tandem.protocol import Heartbeat

MAX_AGENTS_SHOWN = 64  # a peer naming endless agents cannot grow the view without bound


class RunView:
    """The latest heartbeat of each daemon, the last 100 episodes, and the stop conditions."""

    def __init__(self, stop: StopSection, started: float):
        self.stop = stop
        self.started = started
        self.beats: dict[str, Heartbeat] = {}
        self.returns: deque[float] = deque(maxlen=100)
        self.agent_returns: dict[str, deque[float]] = {}  # multi-agent runs: each agent's last 100 episodes
        self.episodes = 0
        self.carried_steps: dict[str, int] = {}
        self.segment = 1  # which start of the run this is (a resumed run is its second, third...)
        self.earlier_steps = 0  # env steps of the run's earlier starts
        self.malformed = 0  # control messages dropped as malformed
        self.unknown_heartbeats = 0  # heartbeats from daemons this supervisor did not start (and does not adopt)
        self.env_steps_rate = RateMeter()
        self.updates_rate = RateMeter()

    def heartbeat(self, beat: Heartbeat, now: float) -> None:
        old = self.beats.get(beat.name)
        if old is not None and old.incarnation != beat.incarnation and beat.role == Role.ACTOR:
            # A restarted actor counts from zero again: keep what its earlier incarnations did.
            self.carried_steps[beat.name] = self.carried_steps.get(beat.name, 0) + int(old.counters.get("env_steps", 0))
        self.beats[beat.name] = beat
        self.env_steps_rate.add(now, self.env_steps())
        self.updates_rate.add(now, self.learner_counter("updates"))

    def continue_from(self, earlier: Earlier) -> None:
        """A resumed run: env steps and episodes count on from what its earlier starts recorded."""
        self.segment = earlier.segment + 1
        self.earlier_steps = earlier.env_steps
        self.episodes = earlier.episodes + self.episodes

    def episodes_report(self, returns: list, now: float, agents: list | None = None) -> None:
        """Episode returns an actor reported; with `agents` (multi-agent runs), one agent's episode each."""
        if agents is not None and len(agents) == len(returns):
            for agent, value in zip(agents, returns):
                if (
                    isinstance(value, (int, float))
                    and isinstance(agent, str)
                    and (agent in self.agent_returns or len(self.agent_returns) < MAX_AGENTS_SHOWN)
                ):
                    self.agent_returns.setdefault(agent, deque(maxlen=100)).append(float(value))
        values = [float(r) for r in returns if isinstance(r, (int, float))]
        self.returns.extend(values)
        self.episodes += len(values)

    def _sum(self, role: str, key: str) -> float:
        return sum(b.counters.get(key, 0) for b in self.beats.values() if b.role == role)

    def env_steps(self) -> int:
        return int(self._sum("actor", "env_steps")) + sum(self.carried_steps.values()) + self.earlier_steps

    def learner_counter(self, key: str) -> float:
        """Summed over policies; a replicated policy counts once (its replicas update in step: replica 0 speaks)."""
        return sum(
            b.counters.get(key, 0) for n, b in self.beats.items() if b.role == Role.LEARNER and replica_rank(n) == 0
        )

    def eval_counter(self, key: str) -> float | None:
        beat = self.beats.get("evaluator")
        return beat.counters.get(key) if beat else None

    def mean_return(self) -> float | None:
        return sum(self.returns) / len(self.returns) if self.returns else None

    def policy_figures(self) -> dict[str, dict[str, float | int | None]]:
        """Per policy (runs with several learners): its version, updates and evaluation return."""
        # one row per policy: its first replica speaks for it (replicas train in step, with the same version)
        learners = {n: b for n, b in self.beats.items() if b.role == Role.LEARNER and replica_rank(n) == 0}
        if len(learners) < 2:
            return {}
        evaluator = self.beats.get("evaluator")
        out = {}
        for name, beat in sorted(learners.items()):
            policy = learner_policy(name)
            out[policy] = {
                "version": beat.counters.get("version"),
                "updates": beat.counters.get("updates"),
                "eval_return": evaluator.counters.get(f"eval_return.{policy}") if evaluator else None,
                "train": train_diagnostics(beat.counters),
            }
        return out

    def figures(self, now: float) -> dict:
        actor_versions = [b.counters.get("version", -1) for b in self.beats.values() if b.role == Role.ACTOR]
        learner_versions = [b.counters.get("version", -1) for b in self.beats.values() if b.role == Role.LEARNER]
        extra: dict = {}
        if policies := self.policy_figures():
            extra["policies"] = policies
        else:
            learner = next((b for b in self.beats.values() if b.role == Role.LEARNER), None)
            if learner is not None and (train := train_diagnostics(learner.counters)):
                extra["train"] = train
        servers = [b.counters for b in self.beats.values() if b.role == Role.ACTOR and "serve_port" in b.counters]
        if servers:  # action servers: games connected, requests/s, and the worst server's p99 latency
            extra["games"] = int(sum(c.get("games", 0) for c in servers))
            extra["serve_requests_per_s"] = round(sum(c.get("serve_requests_per_s", 0) for c in servers), 1)
            extra["serve_latency_p99_ms"] = max((c.get("serve_latency_p99_ms", 0) for c in servers), default=0)
            batches = [c["serve_batch_mean"] for c in servers if c.get("serve_batch_mean")]
            extra["serve_batch_mean"] = round(sum(batches) / len(batches), 2) if batches else None
        if self.agent_returns:
            extra["agent_returns_100"] = {a: round(sum(v) / len(v), 2) for a, v in sorted(self.agent_returns.items())}
        return {
            "segment": self.segment,
            "elapsed_s": round(now - self.started, 1),  # of this start (as stop.seconds counts)
            "env_steps": self.env_steps(),
            "env_steps_per_s": round(self.env_steps_rate.rate(), 1),
            "updates": int(self.learner_counter("updates")),
            "updates_per_s": round(self.updates_rate.rate(), 3),
            "episodes": self.episodes,
            "mean_return_100": self.mean_return(),
            "eval_return": self.eval_counter("eval_return"),
            "eval_version": self.eval_counter("eval_version"),
            "eval_env_steps": self.eval_counter("eval_env_steps"),  # behind the version that round played
            "version": int(min(learner_versions)) if learner_versions else None,
            "actor_version_min": min(actor_versions) if actor_versions else None,
            "lag_mean": round(self.learner_counter("lag_mean"), 2),
            "batches_dropped": int(self._sum("actor", "batches_dropped")),
            # Backpressure: what learners read and threw away, the budget they advertise, how long actors waited.
            "learner_dropped": int(
                self.learner_counter("batches_over_ratio") + self.learner_counter("unrolls_dropped_full")
            ),
            "pace_per_s": round(self.learner_counter("pace_per_s")),
            "pace_credit": round(self.learner_counter("pace_credit")),  # on-policy: transitions per version
            "paced_s": round(self._sum("actor", "paced_s"), 1),
            **extra,
        }

    def stop_reason(self, now: float) -> str | None:
        """Why the run should end now (a set `stop.*` condition was met), or None."""
        full = len(self.returns) == self.returns.maxlen  # the mean of the last 100 episodes, once there are 100
        return stop_reason(
            self.stop,
            eval_return=self.eval_counter("eval_return"),
            mean_return=self.mean_return() if full else None,
            env_steps=self.env_steps(),
            elapsed_s=now - self.started,
        )
