"""The evaluator daemon: rounds of episodes with every policy's newest weights, greedily, and their mean return."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from tandem.daemons.actor.follow import LearnerFollower
from tandem.daemons.actor.link import FollowedPolicy
from tandem.daemons.actor.stepping import env_builder
from tandem.daemons.config.policies import policy_config
from tandem.daemons.config.schema import RunConfig
from tandem.daemons.envs.gym_envs import build_each, close_all
from tandem.daemons.evaluator.cadence import Cadence, machine_cores
from tandem.daemons.evaluator.kept import KeptCheckpoints
from tandem.daemons.evaluator.rounds import make_rounds, round_counters
from tandem.daemons.runtime.control_channel import ControlChannel
from tandem.daemons.runtime.endpoints import find_learner, socket_options
from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.runtime.reporter import Reporter
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.start_token import wait_start_token
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.protocol import sockets

log = logging.getLogger(__name__)


class Evaluator:
    """Each round: take each policy's newest version, play `eval.window_episodes` episodes, report the mean return."""

    def __init__(self, config: RunConfig, stop: StopFlag, control_endpoint: str | None):
        self.config, self.stop = config, stop
        self.ctx = sockets.new_context()
        self.channel = ControlChannel(self.ctx, control_endpoint, socket_options(config)) if control_endpoint else None
        self.reporter = Reporter("evaluator", "evaluator", config.supervisor.heartbeat_interval_s, self.channel)
        self.policies: dict[str, FollowedPolicy] = {}
        self.kept: KeptCheckpoints | None = None
        self.rounds = 0
        self.cadence: Cadence | None = None  # made at the first round: its average starts there

    def build(self) -> Any:
        cfg = self.config
        api, build_one = env_builder(cfg, training=False)
        # the evaluator's envs count toward supervisor.max_concurrent_starts too (a native emulator each)
        wait_start_token(self.channel, "evaluator", self.reporter, lambda: bool(self.stop))
        envs = build_each(min(cfg.eval.num_envs, cfg.eval.window_episodes), build_one, self.enter_stage)
        try:
            return make_rounds(envs, api, cfg)
        except BaseException:
            close_all(envs)
            raise

    def enter_stage(self, stage: str) -> None:
        self.reporter.set_stage(stage)
        self.reporter.tick()

    def run(self) -> int:
        cfg = self.config
        rounds = None
        try:
            set_torch_threads(1)
            rounds = self.build()
            self.reporter.set_stage("connect")
            for n, (policy, spaces) in enumerate(rounds.spaces.items()):
                pconf = policy_config(cfg, policy)
                endpoints = find_learner(self.channel, pconf, policy, self.stop, self.reporter.tick)
                self.policies[policy] = FollowedPolicy(
                    self.ctx, pconf, policy, spaces, endpoints, "evaluator", seed=cfg.run.seed + 999 + n
                )
            self.kept = KeptCheckpoints(
                {p: run_dir(cfg) / f"learner-{p}" for p in self.policies},
                {p: policy_config(cfg, p).algorithm.name for p in self.policies},
                cfg.stop.eval_return,
            )
            self.reporter.update(self.kept.counters())
            self.reporter.set_stage("wait_weights")
            follower = LearnerFollower(self.channel, cfg.actors.relookup_after_s)
            while not self.stop:
                for followed in self.policies.values():
                    followed.poll()
                follower.check(
                    self.policies, time.monotonic(), lambda policy, found: self.policies[policy].reconnect(found)
                )
                if min(f.version for f in self.policies.values()) < 0:
                    self.reporter.tick()
                    time.sleep(0.01)
                    continue
                self.reporter.set_stage("running")
                if not self.play(rounds):
                    break
        except Exception as exc:
            self.reporter.failed(exc)
            raise
        finally:
            self.reporter.set_stage("stopping")
            self.reporter.tick()
            for followed in self.policies.values():
                followed.close()
            if rounds is not None:
                rounds.close()
            self.reporter.close()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def play(self, rounds: Any) -> bool:
        """One round with the versions loaded now, reported at once; False if stopped midway."""
        cfg = self.config
        started, cpu_started = time.monotonic(), time.process_time()
        if self.cadence is None:
            self.cadence = Cadence(cfg.eval.interval_s, cfg.eval.max_cpu_share, machine_cores(), started, cpu_started)
        epsilon = cfg.eval.epsilon

        def choose(policy: str, obs: np.ndarray, env_index: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            return self.policies[policy].net.act(obs, np.full(len(obs), epsilon)), {}

        versions = {p: f.version for p, f in self.policies.items()}
        env_steps = {p: f.env_steps for p, f in self.policies.items()}
        seed = cfg.run.seed + 77_000 + self.rounds * min(cfg.eval.num_envs, cfg.eval.window_episodes)
        returns = rounds.play_round(choose, seed, lambda: bool(self.stop), self.reporter.tick)
        if returns is None:
            return False
        self.rounds += 1
        counters = round_counters(returns, rounds.spaces, versions, env_steps)
        # before the report: a stop on this round's return finds its solved.pt written
        self.kept.after_round(counters, versions, self.rounds, cfg.eval.window_episodes, self.weights)
        ended, cpu_ended = time.monotonic(), time.process_time()
        next_at = self.cadence.next_round_at(started, ended, cpu_ended - cpu_started)
        self.reporter.update(
            {**counters, **self.kept.counters(), "eval_rounds": self.rounds, **self.cadence.counters(ended, cpu_ended)}
        )
        self.reporter.next_beat = 0.0  # report each finished round at once
        self.reporter.tick()
        while not self.stop and time.monotonic() < next_at:
            time.sleep(0.01)
            self.reporter.tick()
        # the average over whole cycles (a round and its pause), which the share bounds
        self.reporter.update(self.cadence.counters(time.monotonic(), time.process_time()))
        return True

    def weights(self, policy: str) -> dict[str, np.ndarray]:
        """The weights `policy` played the round with: no poll() ran during it, so no newer version came in."""
        return {name: np.array(tensor) for name, tensor in self.policies[policy].tensors.items()}
