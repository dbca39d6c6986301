"""The actor daemon: steps K envs (or worlds) with one batched inference per policy and step, pushes unrolls."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from tandem.daemons.actor.exploration import actor_epsilons, decayed
from tandem.daemons.actor.follow import LearnerFollower
from tandem.daemons.actor.link import PolicyLink
from tandem.daemons.actor.pacer import Pacer
from tandem.daemons.actor.stepping import actor_envs, actor_seed, make_stepping
from tandem.daemons.config.policies import policy_config
from tandem.daemons.config.schema import RunConfig
from tandem.daemons.envs.gym_envs import close_all
from tandem.daemons.runtime.control_channel import ControlChannel
from tandem.daemons.runtime.endpoints import find_learner, socket_options
from tandem.daemons.runtime.reporter import Reporter
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.start_token import wait_start_token
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.protocol import sockets

log = logging.getLogger(__name__)
RETURNS_LOG_INTERVAL_S = 30.0  # how often a multi-agent actor's log gets a line of per-agent returns


class Actor:
    """One actor process: build envs, wait for every policy's weights, then act, push and report until stopped."""

    def __init__(self, config: RunConfig, index: int, stop: StopFlag, control_endpoint: str | None):
        self.config, self.index, self.stop = config, index, stop
        self.name = f"actor-{index}"
        self.ctx = sockets.new_context()
        self.channel = ControlChannel(self.ctx, control_endpoint, socket_options(config)) if control_endpoint else None
        self.reporter = Reporter("actor", self.name, config.supervisor.heartbeat_interval_s, self.channel)
        self.links: dict[str, PolicyLink] = {}
        self.follower = LearnerFollower(self.channel, config.actors.relookup_after_s)
        self.pacers: dict[str, Pacer] = {}  # one per policy: each learner advertises its own budget
        self.paced_s = 0.0
        self.stepping: Any = None
        self.next_returns_log = time.monotonic() + RETURNS_LOG_INTERVAL_S

    def wait_start_token(self) -> None:
        """Ask the supervisor for one of its start tokens so at most N actors build envs at once."""
        wait_start_token(self.channel, self.name, self.reporter, lambda: bool(self.stop))

    def build_envs(self) -> tuple[str, list[Any]]:
        """Build `env.num_envs` envs (or env.vector's one vector env of them) in reported stages (stages with a
        deadline: constructors may hang)."""
        api, build = actor_envs(self.config, actor_seed(self.config, self.index))
        self.wait_start_token()
        return api, build(self.enter_stage)

    def build(self) -> Any:
        """What this actor steps (GymStepping or WorldStepping; an action server's games in serve mode)."""
        cfg = self.config
        api, envs = self.build_envs()
        try:
            return make_stepping(
                envs, api, cfg, self.name, seed=actor_seed(cfg, self.index), incarnation=self.reporter.incarnation
            )
        except BaseException:
            close_all(envs)
            raise

    def enter_stage(self, stage: str) -> None:
        self.reporter.set_stage(stage)
        self.reporter.tick()

    def connect(self) -> None:
        self.reporter.set_stage("connect")
        for n, (policy, spaces) in enumerate(self.stepping.spaces.items()):
            pconf = policy_config(self.config, policy)
            endpoints = find_learner(self.channel, pconf, policy, self.stop, self.reporter.tick)
            seed = self.config.run.seed + self.index + 7919 * n
            self.links[policy] = PolicyLink(self.ctx, pconf, policy, spaces, endpoints, self.name, seed)
            self.pacers[policy] = Pacer()

    def run(self) -> int:
        cfg = self.config
        try:
            set_torch_threads(cfg.actors.torch_threads)
            self.stepping = self.build()
            self.connect()
            self.wait_weights()
            self.reporter.set_stage("running")
            self.act()
        except Exception as exc:
            self.reporter.failed(exc)
            raise
        finally:
            self.reporter.set_stage("stopping")
            self.report(force=True)
            if self.stepping is not None:
                self.stepping.close()
            for link in self.links.values():
                link.close()
            self.reporter.close()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def wait_weights(self) -> None:
        self.reporter.set_stage("wait_weights")
        while not self.stop and any(link.version < 0 for link in self.links.values()):
            for link in self.links.values():
                link.poll_weights()
            self.follow_learners()
            self.report()
            time.sleep(0.01)

    def follow_learners(self) -> None:
        """A learner silent for a while may have moved (restarted elsewhere): ask, and follow it."""

        def move(policy: str, endpoints: Any) -> None:
            self.links[policy].reconnect(self.ctx, policy_config(self.config, policy), endpoints)

        self.follower.check({p: link.followed for p, link in self.links.items()}, time.monotonic(), move)

    def act(self) -> None:
        cfg, stepping = self.config, self.stepping
        base_eps = actor_epsilons(
            cfg.actors.epsilon, cfg.actors.epsilon_alpha, self.index, cfg.actors.count, len(stepping)
        )
        epsilons = base_eps

        def choose(policy: str, obs: np.ndarray, env_index: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            return self.links[policy].net.explore(obs, epsilons[env_index])

        if cfg.actors.follow_pace:  # the budget of the version wait_weights took (a credit holds from the first one)
            for policy, link in self.links.items():
                self.pacers[policy].advise(time.monotonic(), *link.followed.pace)
        while not self.stop:
            if stepping.at_boundary():
                # New weights are swapped in only here, so every batch carries the version that acted.
                for policy, link in self.links.items():
                    if link.poll_weights() and cfg.actors.follow_pace:
                        self.pacers[policy].advise(time.monotonic(), *link.followed.pace)
                self.follow_learners()
                epsilons = decayed(base_eps, stepping.env_steps, cfg.actors.epsilon_decay_steps)
                if self.wait_for_pace():
                    continue
            stepping.tick(choose, {p: link.version for p, link in self.links.items()})
            for batch in stepping.outbox:
                self.links[batch.policy_id].push(batch)
                self.pacers[batch.policy_id].spend(time.monotonic(), batch.num_transitions)
            stepping.outbox.clear()
            for link in self.links.values():
                link.flush()
            self.report()

    def wait_for_pace(self) -> bool:
        """Ahead of a learner's budget: wait one short slice (sending, reporting) and say so; else False."""
        now = time.monotonic()
        wait_s = max((pacer.wait_s(now) for pacer in self.pacers.values()), default=0.0)
        if wait_s <= 0:
            return False
        start = time.monotonic()
        if any(pacer.out_of_credit(now) for pacer in self.pacers.values()):
            # Woken early by a weight version, which adds credit (a slow learner's updates take seconds, a fast
            # one's milliseconds; neither should wait a whole slice for it).
            sockets.poll(
                [sock for link in self.links.values() for sock in link.weight_sockets()], int(wait_s * 1000) + 1
            )
        else:
            time.sleep(wait_s)  # a rate's wait is exact
        self.paced_s += time.monotonic() - start
        for link in self.links.values():
            link.flush()
        self.report()
        return True

    def counters(self, now: float) -> dict[str, float]:
        stepping, links = self.stepping, self.links.values()
        counters: dict[str, Any] = {
            "env_steps": stepping.env_steps,
            "episodes": stepping.episodes,
            "version": min((link.version for link in links), default=-1),
            "batches_sent": sum(link.backlog.sent for link in links),
            "batches_dropped": sum(link.backlog.dropped for link in links),
            "backlog": sum(len(link.backlog) for link in links),
            "return_mean": stepping.recent_return_mean(),
            # time spent waiting for the learners' pace, and the transitions/s followed now (0 = no limit)
            "paced_s": round(self.paced_s, 3),
            "pace_per_s": round(sum(p.rate(now) for p in self.pacers.values()), 1),
            **self.follower.counts,
        }
        for link in links:
            for key, value in link.followed.weights.counters.items():
                counters[key] = counters.get(key, 0) + value
            counters.update(
                {
                    f"version.{link.policy_id}": link.version,
                    f"batches_sent.{link.policy_id}": link.backlog.sent,
                    f"batches_dropped.{link.policy_id}": link.backlog.dropped,
                }
            )
        returns = stepping.agent_returns()
        counters.update({f"return.{agent}": value for agent, value in returns.items()})
        if returns and now >= self.next_returns_log:
            self.next_returns_log = now + RETURNS_LOG_INTERVAL_S
            log.info(
                "mean return of recent episodes per agent: %s",
                ", ".join(f"{agent} {value:.2f}" for agent, value in sorted(returns.items())),
            )
        return counters

    def report(self, force: bool = False) -> None:
        """Counters into the next heartbeat; finished episodes to the supervisor; never blocks."""
        now = time.monotonic()
        if self.stepping is None or (not force and now < self.reporter.next_beat):
            if force:
                self.reporter.next_beat = 0.0
                self.reporter.tick(now)
            return
        counters = self.counters(now)
        self.reporter.update(counters)
        episodes = self.stepping.new_episodes
        if self.channel and episodes:
            report = {
                "returns": [r for _, r, _ in episodes],
                "lengths": [n for _, _, n in episodes],
                "version": counters["version"],
            }
            if self.stepping.multi_agent:
                report["agents"] = [a for a, _, _ in episodes]
            self.channel.send("episodes", report)
            episodes.clear()
        if force:
            self.reporter.next_beat = 0.0
        self.reporter.tick(now)
