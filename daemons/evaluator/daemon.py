"""The evaluator daemon: rounds of episodes with every policy's newest weights, greedily, and their mean return."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tandem.daemons.acting.follow import LearnerFollower
from tandem.daemons.acting.link import FollowedPolicy
from tandem.daemons.acting.stepping import env_builder
from tandem.daemons.algorithms.base import act_with
from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.gym_envs import build_each, close_all
from tandem.daemons.evaluator.cadence import Cadence, machine_cores
from tandem.daemons.evaluator.kept import KeptCheckpoints
from tandem.daemons.evaluator.rounds import evaluator_policy_seed, make_rounds, round_counters, round_seed
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.settings.schema import RunConfig

WAIT_WEIGHTS_POLL_S = 0.01
PAUSE_POLL_S = 0.01  # between two rounds: how often the pause looks at the stop flag (and heartbeats)


class Evaluator:
    """Each round: take each policy's newest version, play `eval.window_episodes` episodes, report the mean return."""

    def __init__(self, config: RunConfig, stop: StopFlag, control_endpoint: str | None):
        self.config, self.stop = config, stop
        self.runtime = DaemonRuntime("evaluator", "evaluator", config, control_endpoint, stop)
        self.policies: dict[str, FollowedPolicy] = {}
        self.kept: KeptCheckpoints | None = None
        self.rounds = 0
        self.cadence: Cadence | None = None  # made at the first round: its average starts there

    def build(self) -> Any:
        cfg = self.config
        api, build_one = env_builder(cfg, training=False)
        # the evaluator's envs count toward supervisor.max_concurrent_starts too (a native emulator each)
        self.runtime.wait_start_token()
        envs = build_each(min(cfg.eval.num_envs, cfg.eval.window_episodes), build_one, self.runtime.enter_stage)
        try:
            return make_rounds(envs, api, cfg)
        except BaseException:
            close_all(envs)
            raise

    def run(self) -> int:
        return self.runtime.run(self.main)

    def main(self) -> None:
        cfg, runtime = self.config, self.runtime
        set_torch_threads(1)
        rounds = self.build()
        runtime.on_close(rounds.close)
        runtime.on_close(self.close_policies)  # closed before the rounds' envs
        runtime.reporter.set_stage("connect")
        for n, (policy, spaces) in enumerate(rounds.spaces.items()):
            pconf = policy_config(cfg, policy)
            endpoints = runtime.find_learner(pconf, policy)
            self.policies[policy] = FollowedPolicy(
                runtime.ctx, pconf, policy, spaces, endpoints, "evaluator", seed=evaluator_policy_seed(cfg, n)
            )
        self.kept = KeptCheckpoints(
            {p: run_dir(cfg) / f"learner-{p}" for p in self.policies},
            {p: policy_config(cfg, p).algorithm.name for p in self.policies},
            cfg.stop.eval_return,
        )
        runtime.reporter.update(self.kept.counters())
        runtime.reporter.set_stage("wait_weights")
        follower = LearnerFollower(runtime.channel, cfg.actors.relookup_after_s)
        while not self.stop:
            for followed in self.policies.values():
                followed.poll()
            follower.check(
                self.policies, time.monotonic(), lambda policy, found: self.policies[policy].reconnect(found)
            )
            if min(f.version for f in self.policies.values()) < 0:
                runtime.reporter.tick()
                time.sleep(WAIT_WEIGHTS_POLL_S)
                continue
            runtime.reporter.set_stage("running")
            if not self.play(rounds):
                break

    def close_policies(self) -> None:
        for followed in self.policies.values():
            followed.close()

    def play(self, rounds: Any) -> bool:
        """One round with the versions loaded now, reported at once; False if stopped midway."""
        cfg = self.config
        started, cpu_started = time.monotonic(), time.process_time()
        if self.cadence is None:
            self.cadence = Cadence(cfg.eval.interval_s, cfg.eval.max_cpu_share, machine_cores(), started, cpu_started)
        epsilon = cfg.eval.epsilon

        def choose(
            policy: str, obs: np.ndarray, env_index: np.ndarray, state: np.ndarray | None = None
        ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            return act_with(self.policies[policy].net, obs, np.full(len(obs), epsilon), state), {}

        versions = {p: f.version for p, f in self.policies.items()}
        env_steps = {p: f.env_steps for p, f in self.policies.items()}
        seed = round_seed(cfg, self.rounds)
        returns = rounds.play_round(choose, seed, lambda: bool(self.stop), self.runtime.reporter.tick)
        if returns is None:
            return False
        self.rounds += 1
        counters = round_counters(returns, rounds.spaces, versions, env_steps)
        # before the report: a stop on this round's return finds its solved.pt written
        self.kept.after_round(counters, versions, self.rounds, cfg.eval.window_episodes, self.weights)
        ended, cpu_ended = time.monotonic(), time.process_time()
        next_at = self.cadence.next_round_at(started, ended, cpu_ended - cpu_started)
        reporter = self.runtime.reporter
        reporter.update(
            {**counters, **self.kept.counters(), "eval_rounds": self.rounds, **self.cadence.counters(ended, cpu_ended)}
        )
        reporter.report_now()  # each finished round at once
        while not self.stop and time.monotonic() < next_at:
            time.sleep(PAUSE_POLL_S)
            reporter.tick()
        # the average over whole cycles (a round and its pause), which the share bounds
        reporter.update(self.cadence.counters(time.monotonic(), time.process_time()))
        return True

    def weights(self, policy: str) -> dict[str, np.ndarray]:
        """The weights `policy` played the round with: no poll() ran during it, so no newer version came in."""
        return {name: np.array(tensor) for name, tensor in self.policies[policy].tensors.items()}
