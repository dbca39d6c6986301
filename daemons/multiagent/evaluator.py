"""The multi-agent evaluator: rounds of world episodes with every policy's newest weights, per-agent returns."""

from __future__ import annotations

import time

import numpy as np

from daemons.algorithms import make_policy
from daemons.config.policies import policy_config
from daemons.endpoints import learner_endpoints, lookup_endpoints, socket_options
from daemons.evaluator import Evaluator
from daemons.multiagent.rollout import MultiAgentRollout
from daemons.multiagent.spaces import policy_spaces
from daemons.multiagent.worlds import make_world
from daemons.torch_threads import set_torch_threads
from daemons.weights_client import WeightsClient
from protocol import sockets


class MultiAgentEvaluator(Evaluator):
    """Each round: reset every world, play `eval.window_episodes` world episodes, report each agent's mean return."""

    def __init__(self, config, stop, control_endpoint: str | None, api: str):
        super().__init__(config, stop, control_endpoint)
        self.api = api

    def run(self) -> int:
        cfg = self.config
        set_torch_threads(1)
        count = min(cfg.eval.num_envs, cfg.eval.window_episodes)
        worlds = []
        for k in range(count):
            self.reporter.set_stage(f"build_env {k + 1}/{count}")
            self.reporter.tick()
            worlds.append(make_world(cfg.env, self.api))
        spaces = policy_spaces(cfg, worlds[0])
        rollout = MultiAgentRollout(worlds, self.api, spaces, 1, "evaluator", seed=cfg.run.seed + 77_000, record=False)
        nets, clients = {}, {}
        try:
            self.reporter.set_stage("connect")
            for n, (policy, s) in enumerate(spaces.items()):
                pconf = policy_config(cfg, policy)
                nets[policy] = make_policy(pconf, s.observation_space, s.action_space, seed=cfg.run.seed + 999 + n,
                                           mask_size=s.mask_size)
                endpoints = learner_endpoints(pconf)
                if self.channel is not None:
                    endpoints = lookup_endpoints(self.channel, policy, endpoints, self.stop, self.reporter.tick)
                clients[policy] = WeightsClient(self.ctx, policy, endpoints.weights, endpoints.snapshot, "evaluator",
                                                cfg.actors.weights_refresh_s, socket_options(pconf))
            versions = {policy: -1 for policy in spaces}
            self.reporter.set_stage("wait_weights")
            while not self.stop:
                for policy, client in clients.items():
                    blob = client.poll()
                    if blob is not None:
                        nets[policy].load_weights(blob.tensors)
                        versions[policy] = blob.version
                if min(versions.values()) < 0:
                    self.reporter.tick()
                    time.sleep(0.01)
                    continue
                self.reporter.set_stage("running")
                round_started = time.monotonic()
                returns = self.play_worlds(rollout, nets, seed=cfg.run.seed + 77_000 + self.rounds * len(worlds))
                if returns is None:
                    break
                self.rounds += 1
                agent_means = {agent: float(np.mean(values)) for agent, values in returns.items()}
                counters = {"eval_return": float(np.mean(list(agent_means.values()))), "eval_rounds": self.rounds,
                            "eval_version": min(versions.values())}
                counters.update({f"eval_return.{agent}": value for agent, value in agent_means.items()})
                for policy, s in spaces.items():
                    mine = [agent_means[a] for a in s.agents if a in agent_means]
                    if mine:
                        counters[f"eval_return.{policy}"] = float(np.mean(mine))
                    counters[f"eval_version.{policy}"] = versions[policy]
                self.reporter.update(counters)
                self.reporter.next_beat = 0.0  # report each finished round at once
                self.reporter.tick()
                while not self.stop and time.monotonic() < round_started + cfg.eval.interval_s:
                    time.sleep(0.01)
                    self.reporter.tick()
        finally:
            self.reporter.set_stage("stopping")
            self.reporter.tick()
            for client in clients.values():
                client.close()
            rollout.close()
            if self.channel:
                self.channel.close()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def play_worlds(self, rollout: MultiAgentRollout, nets: dict, seed: int) -> dict[str, list[float]] | None:
        """Per-agent returns of `window_episodes` world episodes (None if stopped midway)."""
        rollout.restart(seed)
        target = rollout.episodes + self.config.eval.window_episodes
        epsilon = self.config.eval.epsilon
        returns: dict[str, list[float]] = {}

        def choose(policy: str, obs: np.ndarray, world_idx: np.ndarray) -> np.ndarray:
            return nets[policy].act(obs, np.full(len(obs), epsilon))

        while rollout.episodes < target:
            if self.stop:
                return None
            rollout.tick(choose, {})
            for agent, ret, _ in rollout.new_episodes:
                returns.setdefault(agent, []).append(ret)
            rollout.new_episodes.clear()
            self.reporter.tick()
        return returns
