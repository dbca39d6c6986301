"""The actor daemon: steps K envs with one batched inference per step and pushes unrolls to its learner."""

from __future__ import annotations

import logging
import time

import numpy as np

from daemons.algorithms import make_policy
from daemons.backlog import Backlog
from daemons.config.schema import RunConfig
from daemons.control_channel import ControlChannel, ControlTimeout
from daemons.endpoints import learner_endpoints, lookup_endpoints, socket_options
from daemons.envs import EnvGroup, make_env
from daemons.runtime import Reporter, StopFlag
from daemons.torch_threads import set_torch_threads
from daemons.weights_client import WeightsClient
from protocol import TransitionBatch, sockets

log = logging.getLogger(__name__)
MAX_UNREPORTED_EPISODES = 1000
POLICY_ID = "default"


def actor_epsilons(base: float, alpha: float, index: int, count: int, num_envs: int) -> np.ndarray:
    """Ape-X epsilons spread over every env of every actor: env g of G gets base ** (1 + alpha * g / (G - 1))."""
    total = max(count, 1) * num_envs
    g = index * num_envs + np.arange(num_envs)
    if total == 1:
        return np.full(num_envs, base)
    return base ** (1.0 + alpha * g / (total - 1))


def decayed(epsilons: np.ndarray, env_steps: int, decay_steps: int) -> np.ndarray:
    """Linear decay from 1.0 to each env's own epsilon over `decay_steps` of this actor's env steps."""
    if decay_steps <= 0 or env_steps >= decay_steps:
        return epsilons
    return 1.0 - (1.0 - epsilons) * (env_steps / decay_steps)


class UnrollBuilder:
    """Collects T steps of K envs into fresh arrays (fresh each unroll, so zero-copy sends stay safe)."""

    def __init__(self, steps: int, first_obs: np.ndarray, action_shape: tuple, action_dtype: np.dtype):
        self.steps, self.t = steps, 0
        envs = first_obs.shape[0]
        self.obs = np.empty((steps + 1, *first_obs.shape), first_obs.dtype)
        self.obs[0] = first_obs
        self.actions = np.empty((steps, envs, *action_shape), action_dtype)
        self.rewards = np.empty((steps, envs), np.float32)
        self.terminated = np.empty((steps, envs), bool)
        self.truncated = np.empty((steps, envs), bool)
        self.finals: list[np.ndarray] = []

    def add(self, actions: np.ndarray, result) -> bool:
        """Record one step; True when the unroll is full."""
        t = self.t
        self.actions[t], self.rewards[t] = actions, result.rewards
        self.terminated[t], self.truncated[t] = result.terminated, result.truncated
        self.obs[t + 1] = result.obs
        if len(result.final_obs):
            self.finals.append(result.final_obs)
        self.t += 1
        return self.t == self.steps

    def final_obs(self) -> np.ndarray:
        if self.finals:
            return np.concatenate(self.finals)
        return np.empty((0, *self.obs.shape[2:]), self.obs.dtype)


class Actor:
    """One actor process: build envs, wait for weights, then act, push and report until stopped."""

    def __init__(self, config: RunConfig, index: int, stop: StopFlag, control_endpoint: str | None):
        self.config, self.index, self.stop = config, index, stop
        self.name = f"actor-{index}"
        self.ctx = sockets.new_context()
        channel = ControlChannel(self.ctx, control_endpoint) if control_endpoint else None
        self.reporter = Reporter("actor", self.name, config.supervisor.heartbeat_interval_s, channel)
        self.channel = channel
        self.new_episodes: list[tuple[float, int]] = []
        self.seq = 0

    def wait_start_token(self) -> None:
        """Ask the supervisor for one of its start tokens so at most N actors build envs at once."""
        if self.channel is None:
            return
        self.reporter.set_stage("wait_start_token")
        while not self.stop:
            self.reporter.tick()
            try:
                reply = self.channel.request("start_token", {"name": self.name}, timeout_s=2.0)
                if reply.data.get("granted") or (not reply.ok and reply.code == "unknown_command"):
                    return  # granted, or a control endpoint that hands out no tokens
            except ControlTimeout:
                log.warning("no answer from the supervisor about a start token; asking again")
            time.sleep(0.1)

    def build_envs(self) -> EnvGroup:
        self.wait_start_token()
        count = self.config.env.num_envs
        envs = []
        for k in range(count):
            self.reporter.set_stage(f"build_env {k + 1}/{count}")
            self.reporter.tick()
            envs.append(make_env(self.config.env))
        return EnvGroup(envs, seed=self.config.run.seed + 1000 * (self.index + 1))

    def run(self) -> int:
        cfg = self.config
        set_torch_threads(cfg.actors.torch_threads)
        envs = self.build_envs()
        policy = make_policy(cfg, envs.observation_space, envs.action_space, seed=cfg.run.seed + self.index)
        endpoints = learner_endpoints(cfg)
        if self.channel is not None:
            self.reporter.set_stage("connect")
            endpoints = lookup_endpoints(self.channel, POLICY_ID, endpoints, self.stop, self.reporter.tick)
        opts = socket_options(cfg)
        self.reporter.set_stage("connect")
        push = sockets.transitions_push(self.ctx, endpoints.transitions, opts)
        weights = WeightsClient(self.ctx, POLICY_ID, endpoints.weights, endpoints.snapshot, self.name,
                                cfg.actors.weights_refresh_s, opts)
        backlog = Backlog(cfg.actors.backlog_batches)
        base_eps = actor_epsilons(cfg.actors.epsilon, cfg.actors.epsilon_alpha, self.index, cfg.actors.count, len(envs))
        version = -1
        self.reporter.set_stage("wait_weights")
        try:
            while not self.stop and version < 0:
                blob = weights.poll()
                if blob is not None:
                    policy.load_weights(blob.tensors)
                    version = blob.version
                self.report(envs, backlog, weights, version)
                if version < 0:
                    time.sleep(0.01)
            self.reporter.set_stage("running")
            action_shape = envs.action_space.shape or ()
            action_dtype = np.dtype(envs.action_space.dtype or np.int64)
            while not self.stop:
                # New weights are swapped in only here, between unrolls, so every batch has one version.
                blob = weights.poll()
                if blob is not None:
                    policy.load_weights(blob.tensors)
                    version = blob.version
                unroll = UnrollBuilder(cfg.actors.unroll_length, envs.obs, action_shape, action_dtype)
                epsilons = decayed(base_eps, envs.env_steps, cfg.actors.epsilon_decay_steps)
                done = False
                while not done and not self.stop:
                    actions = policy.act(envs.obs, epsilons)
                    result = envs.step(actions)
                    self.collect_episodes(envs, result)
                    done = unroll.add(actions, result)
                    self.report(envs, backlog, weights, version)
                if not done:
                    break
                batch = TransitionBatch(
                    policy_id=POLICY_ID, actor_id=self.name, incarnation=self.reporter.incarnation, seq=self.seq,
                    policy_version=version, env_steps=envs.env_steps, obs=unroll.obs, actions=unroll.actions,
                    rewards=unroll.rewards, terminated=unroll.terminated, truncated=unroll.truncated,
                    final_obs=unroll.final_obs(),
                )
                self.seq += 1
                backlog.push(batch.to_frames())
                backlog.flush(lambda frames: bool(sockets.send_frames(push, frames)))
        finally:
            self.reporter.set_stage("stopping")
            self.report(envs, backlog, weights, version, force=True)
            weights.close()
            envs.close()
            if self.channel:
                self.channel.close()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def collect_episodes(self, envs: EnvGroup, result) -> None:
        ended = np.flatnonzero(result.terminated | result.truncated)
        if len(ended):
            self.new_episodes.extend(list(envs.finished)[-len(ended):])
            del self.new_episodes[:-MAX_UNREPORTED_EPISODES]

    def report(self, envs: EnvGroup, backlog: Backlog, weights: WeightsClient, version: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self.reporter.next_beat:
            return
        self.reporter.update({
            "env_steps": envs.env_steps, "episodes": envs.episodes, "version": version, "batches_sent": backlog.sent,
            "batches_dropped": backlog.dropped, "backlog": len(backlog), "return_mean": envs.recent_mean_return(),
            **weights.counters,
        })
        if self.channel and self.new_episodes:
            self.channel.send("episodes", {
                "returns": [r for r, _ in self.new_episodes], "lengths": [n for _, n in self.new_episodes],
                "version": version,
            })
            self.new_episodes.clear()
        if force:
            self.reporter.next_beat = 0.0
        self.reporter.tick(now)


def make_actor(config: RunConfig, index: int, stop: StopFlag, control_endpoint: str | None) -> Actor:
    """The actor for the config's env: this one for gymnasium envs, MultiAgentActor for PettingZoo ones."""
    from daemons.multiagent.worlds import MULTI_AGENT_APIS, env_api

    api = env_api(config.env)
    if api in MULTI_AGENT_APIS:
        from daemons.multiagent.actor import MultiAgentActor

        return MultiAgentActor(config, index, stop, control_endpoint, api)
    return Actor(config, index, stop, control_endpoint)
