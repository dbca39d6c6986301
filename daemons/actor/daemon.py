"""The actor daemon: steps K envs (or worlds) with one batched inference per policy and step, pushes unrolls."""

from __future__ import annotations

from typing import Any

import numpy as np

from tandem.daemons.acting.stepping import actor_envs, actor_seed, make_stepping
from tandem.daemons.actor.exploration import actor_epsilons, decayed
from tandem.daemons.actor.pacing import Pacing
from tandem.daemons.actor.process import ActorProcess
from tandem.daemons.actor.report import ActorReport
from tandem.daemons.actor.selfplay import SelfPlay
from tandem.daemons.actor.warmup import UniformActions, explore_or_warm_up, uniform_warmup
from tandem.daemons.config.policies import policy_config
from tandem.daemons.config.selfplay import actor_member
from tandem.daemons.envs.gym_envs import close_all
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.settings.setup_errors import SetupError


class Actor(ActorProcess):
    """One actor process: build envs, wait for every policy's weights, then act, push and report until stopped."""

    def __init__(self, config: RunConfig, index: int, stop: StopFlag, control_endpoint: str | None):
        super().__init__(config, index, stop, control_endpoint)
        self.pacing = Pacing(following=config.actors.follow_pace)
        self.reports = ActorReport(self.runtime, self.links, self.pacing)
        self.stepping: Any = None  # GymStepping or WorldStepping, once built
        self.selfplay: SelfPlay | None = None

    def main(self) -> None:
        self.start()
        if self.config.selfplay.enabled:
            self.seat_selfplay()
        self.runtime.reporter.set_stage("running")
        self.act()

    def build(self) -> Any:
        """Build `env.num_envs` envs (or env.vector's one vector env of them) in reported stages (stages with a
        deadline: constructors may hang), after a start token; wrap them in what this actor steps."""
        cfg, seed = self.config, actor_seed(self.config, self.index)
        api, build = actor_envs(cfg, seed)
        self.runtime.wait_start_token()
        envs = build(self.runtime.enter_stage)
        try:
            # a self-play league's member takes every seat its agents patterns match in its own actors
            first = actor_member(cfg, self.index) if cfg.selfplay.enabled else None
            return make_stepping(
                envs, api, cfg, self.runtime.name, seed=seed, incarnation=self.runtime.reporter.incarnation, first=first
            )
        except BaseException:
            close_all(envs)
            raise

    def keep(self, built: Any) -> None:
        self.stepping = built

    def seat_selfplay(self) -> None:
        """[selfplay]: the learning policy (this actor's league member) takes one seat of each world, pooled
        versions of it (or of the policies its league entry names) the others."""
        if not getattr(self.stepping, "multi_agent", False):
            raise SetupError(
                "selfplay.enabled needs a multi-agent env (PettingZoo AEC or parallel) with seats to play; "
                f"env.id {self.config.env.id!r} is a single-agent env"
            )
        policy = actor_member(self.config, self.index)
        seed = actor_seed(self.config, self.index)
        link = self.links[policy]
        self.selfplay = SelfPlay(
            self.config,
            self.runtime.ctx,
            link,
            self.runtime.name,
            len(self.stepping),
            seed,
            watch=lambda other: self.links.watch(other, link.spaces),
        )
        self.runtime.on_close(self.selfplay.close)
        self.stepping.rollout.seat(self.selfplay.seats, self.selfplay.choose)
        self.reports.extra = lambda now: self.selfplay.counters()

    def act(self) -> None:
        cfg, stepping, links, pacing = self.config, self.stepping, self.links, self.pacing
        base_eps = actor_epsilons(
            cfg.actors.explore.epsilon, cfg.actors.explore.epsilon_alpha, self.index, cfg.actors.count, len(stepping)
        )
        epsilons = base_eps
        seed = actor_seed(cfg, self.index)
        warmup = {  # policies whose algorithm acts uniformly at random until its learner has trained (SAC)
            policy: UniformActions(link.spaces.action_space, seed + n)
            for n, (policy, link) in enumerate(links.items())
            if uniform_warmup(policy_config(cfg, policy))
        }

        def choose(
            policy: str, obs: np.ndarray, env_index: np.ndarray, state: np.ndarray | None = None
        ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            link = links[policy]
            return explore_or_warm_up(link.net, warmup.get(policy), link.version, obs, epsilons[env_index], state)

        for policy, link in links.items():  # the budget of the version wait_weights took (a credit holds from it)
            pacing.advise(policy, link)
        while not self.stop:
            if stepping.at_boundary():
                # New weights are swapped in only here, so every batch carries the version that acted.
                for policy, link in links.items():
                    if link.poll_weights():
                        pacing.advise(policy, link)
                links.follow()
                if self.selfplay is not None:
                    self.selfplay.poll()
                epsilons = decayed(base_eps, stepping.env_steps, cfg.actors.explore.epsilon_decay_steps)
                if pacing.wait(links.weight_sockets()):  # ahead of a learner's budget: a slice waited
                    links.flush()
                    self.report()
                    continue
            stepping.tick(choose, links.versions())
            if self.selfplay is not None:
                self.selfplay.attach_games(stepping.outbox)
            links.push(stepping.outbox, sent=pacing.spend)
            links.flush()
            self.report()

    def report(self, force: bool = False) -> None:
        """Counters into the next heartbeat; finished episodes to the supervisor; never blocks."""
        self.reports.send(self.stepping, force)
