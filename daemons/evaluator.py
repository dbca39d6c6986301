"""The evaluator daemon: plays whole rounds of episodes with the newest weights, greedily, and reports the mean."""

from __future__ import annotations

import logging
import time

import numpy as np

from daemons.actor import POLICY_ID
from daemons.algorithms import make_policy
from daemons.config.schema import RunConfig
from daemons.control_channel import ControlChannel
from daemons.endpoints import learner_endpoints, lookup_endpoints, socket_options
from daemons.envs import make_env
from daemons.runtime import Reporter, StopFlag
from daemons.torch_threads import set_torch_threads
from daemons.weights_client import WeightsClient
from protocol import sockets

log = logging.getLogger(__name__)


def episode_quotas(episodes: int, num_envs: int) -> np.ndarray:
    """Episodes each env plays in a round; fixed up front so short episodes are not over-counted."""
    quotas = np.full(num_envs, episodes // num_envs)
    quotas[: episodes % num_envs] += 1
    return quotas


class Evaluator:
    """Each round: take the newest version, play `eval.window_episodes` episodes with it, report the mean return."""

    def __init__(self, config: RunConfig, stop: StopFlag, control_endpoint: str | None):
        self.config, self.stop = config, stop
        self.ctx = sockets.new_context()
        self.channel = ControlChannel(self.ctx, control_endpoint) if control_endpoint else None
        self.reporter = Reporter("evaluator", "evaluator", config.supervisor.heartbeat_interval_s, self.channel)
        self.rounds = 0

    def run(self) -> int:
        cfg = self.config
        set_torch_threads(1)
        count = min(cfg.eval.num_envs, cfg.eval.window_episodes)
        envs = []
        for k in range(count):
            self.reporter.set_stage(f"build_env {k + 1}/{count}")
            self.reporter.tick()
            envs.append(make_env(cfg.env))
        policy = make_policy(cfg, envs[0].observation_space, envs[0].action_space, seed=cfg.run.seed + 999)
        endpoints = learner_endpoints(cfg)
        if self.channel is not None:
            self.reporter.set_stage("connect")
            endpoints = lookup_endpoints(self.channel, POLICY_ID, endpoints, self.stop, self.reporter.tick)
        weights = WeightsClient(self.ctx, POLICY_ID, endpoints.weights, endpoints.snapshot, "evaluator",
                                cfg.actors.weights_refresh_s, socket_options(cfg))
        self.reporter.set_stage("wait_weights")
        version = -1
        try:
            while not self.stop:
                blob = weights.poll()
                if blob is not None:
                    policy.load_weights(blob.tensors)
                    version = blob.version
                if version < 0:
                    self.reporter.tick()
                    time.sleep(0.01)
                    continue
                self.reporter.set_stage("running")
                round_started = time.monotonic()
                returns = self.play_round(envs, policy, seed=cfg.run.seed + 77_000 + self.rounds * len(envs))
                if returns is None:
                    break
                self.rounds += 1
                self.reporter.update({"eval_return": float(np.mean(returns)), "eval_version": version,
                                      "eval_rounds": self.rounds, "eval_return_min": float(np.min(returns))})
                self.reporter.next_beat = 0.0  # report each finished round at once
                self.reporter.tick()
                while not self.stop and time.monotonic() < round_started + cfg.eval.interval_s:
                    time.sleep(0.01)
                    self.reporter.tick()
        finally:
            self.reporter.set_stage("stopping")
            self.reporter.tick()
            weights.close()
            for env in envs:
                env.close()
            if self.channel:
                self.channel.close()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def play_round(self, envs: list, policy, seed: int) -> list[float] | None:
        """Returns of `window_episodes` episodes with the current weights (None if stopped midway)."""
        quotas = episode_quotas(self.config.eval.window_episodes, len(envs))
        epsilons = np.full(len(envs), self.config.eval.epsilon)
        obs = [np.asarray(env.reset(seed=seed + k)[0]) for k, env in enumerate(envs)]
        running = np.zeros(len(envs))
        returns: list[float] = []
        while (active := np.flatnonzero(quotas > 0)).size:
            if self.stop:
                return None
            actions = policy.act(np.stack([obs[k] for k in active]), epsilons[active])
            for action, k in zip(actions, active):
                ob, reward, terminated, truncated, _ = envs[k].step(action.item())
                running[k] += reward
                if terminated or truncated:
                    returns.append(float(running[k]))
                    running[k] = 0.0
                    quotas[k] -= 1
                    ob, _ = envs[k].reset()
                obs[k] = np.asarray(ob)
            self.reporter.tick()
        return returns


def make_evaluator(config: RunConfig, stop: StopFlag, control_endpoint: str | None) -> Evaluator:
    """This evaluator for gymnasium envs, MultiAgentEvaluator for PettingZoo ones."""
    from daemons.multiagent.worlds import MULTI_AGENT_APIS, env_api

    api = env_api(config.env)
    if api in MULTI_AGENT_APIS:
        from daemons.multiagent.evaluator import MultiAgentEvaluator

        return MultiAgentEvaluator(config, stop, control_endpoint, api)
    return Evaluator(config, stop, control_endpoint)
