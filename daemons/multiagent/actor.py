"""The multi-agent actor: K worlds of a PettingZoo env, each agent acting with its policy's newest weights."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from daemons.actor import MAX_UNREPORTED_EPISODES, Actor, actor_epsilons, decayed
from daemons.algorithms import make_policy
from daemons.backlog import Backlog
from daemons.config.policies import policy_config
from daemons.config.schema import RunConfig
from daemons.endpoints import learner_endpoints, lookup_endpoints, socket_options
from daemons.envs import EnvBuildError
from daemons.multiagent.rollout import MultiAgentRollout
from daemons.multiagent.spaces import PolicySpaces, policy_spaces
from daemons.multiagent.worlds import make_world
from daemons.torch_threads import set_torch_threads
from daemons.weights_client import WeightsClient
from protocol import TransitionBatch, sockets

log = logging.getLogger(__name__)
RETURNS_LOG_INTERVAL_S = 30.0  # how often the actor's log gets a line of per-agent returns


class PolicyLink:
    """What an actor holds for one policy: its network, the weights it follows, and its own learner's socket.

    Links never wait on each other: a policy whose learner is slow or gone keeps acting with the last
    version it got, and its batches queue in its own bounded backlog (oldest dropped)."""

    def __init__(self, ctx: Any, config: RunConfig, policy: str, spaces: PolicySpaces, endpoints, name: str, seed: int):
        self.policy_id, self.config = policy, config
        self.net = make_policy(config, spaces.observation_space, spaces.action_space, seed=seed, mask_size=spaces.mask_size)
        opts = socket_options(config)
        self.push_socket = sockets.transitions_push(ctx, endpoints.transitions, opts)
        self.weights = WeightsClient(ctx, policy, endpoints.weights, endpoints.snapshot, name,
                                     config.actors.weights_refresh_s, opts)
        self.backlog = Backlog(config.actors.backlog_batches)
        self.version = -1

    def poll_weights(self) -> None:
        blob = self.weights.poll()
        if blob is not None:
            self.net.load_weights(blob.tensors)
            self.version = blob.version

    def push(self, batch: TransitionBatch) -> None:
        self.backlog.push(batch.to_frames())

    def flush(self) -> None:
        self.backlog.flush(lambda frames: bool(sockets.send_frames(self.push_socket, frames)))

    def close(self) -> None:
        self.weights.close()
        sockets.close(self.push_socket, linger_ms=0)


class MultiAgentActor(Actor):
    """One actor process for a PettingZoo env: builds K worlds, follows every policy, pushes per policy."""

    def __init__(self, config: RunConfig, index: int, stop, control_endpoint: str | None, api: str):
        super().__init__(config, index, stop, control_endpoint)
        self.api = api
        self.links: dict[str, PolicyLink] = {}
        self.new_agent_episodes: list[tuple[str, float, int]] = []
        self.next_returns_log = time.monotonic() + RETURNS_LOG_INTERVAL_S

    def build_worlds(self) -> list[Any]:
        cfg = self.config
        if cfg.env.max_episode_steps:
            raise EnvBuildError("env.max_episode_steps is for gymnasium envs; give a PettingZoo env its own "
                                "limit in env.kwargs (for instance max_cycles)")
        self.wait_start_token()
        worlds = []
        for k in range(cfg.env.num_envs):
            self.reporter.set_stage(f"build_env {k + 1}/{cfg.env.num_envs}")
            self.reporter.tick()
            worlds.append(make_world(cfg.env, self.api))
        return worlds

    def connect(self, spaces: dict[str, PolicySpaces]) -> None:
        self.reporter.set_stage("connect")
        for n, (policy, s) in enumerate(spaces.items()):
            pconf = policy_config(self.config, policy)
            endpoints = learner_endpoints(pconf)
            if self.channel is not None:
                endpoints = lookup_endpoints(self.channel, policy, endpoints, self.stop, self.reporter.tick)
            seed = self.config.run.seed + self.index + 7919 * n
            self.links[policy] = PolicyLink(self.ctx, pconf, policy, s, endpoints, self.name, seed)

    def run(self) -> int:
        cfg = self.config
        set_torch_threads(cfg.actors.torch_threads)
        worlds = self.build_worlds()
        rollout = None
        try:
            spaces = policy_spaces(cfg, worlds[0])
            rollout = MultiAgentRollout(worlds, self.api, spaces, cfg.actors.unroll_length, self.name,
                                        seed=cfg.run.seed + 1000 * (self.index + 1), incarnation=self.reporter.incarnation)
            self.connect(spaces)
            base_eps = actor_epsilons(cfg.actors.epsilon, cfg.actors.epsilon_alpha, self.index, cfg.actors.count,
                                      len(worlds))
            self.reporter.set_stage("wait_weights")
            while not self.stop and any(link.version < 0 for link in self.links.values()):
                for link in self.links.values():
                    link.poll_weights()
                self.report(rollout)
                time.sleep(0.01)
            self.reporter.set_stage("running")
            while not self.stop:
                # Each policy's new weights are swapped in between ticks: a tick's batched call uses one version.
                for link in self.links.values():
                    link.poll_weights()
                epsilons = decayed(base_eps, rollout.env_steps, cfg.actors.epsilon_decay_steps)
                versions = {p: link.version for p, link in self.links.items()}

                def choose(policy: str, obs: np.ndarray, world_idx: np.ndarray) -> np.ndarray:
                    return self.links[policy].net.act(obs, epsilons[world_idx])

                rollout.tick(choose, versions)
                for batch in rollout.outbox:
                    self.links[batch.policy_id].push(batch)
                rollout.outbox.clear()
                for link in self.links.values():
                    link.flush()
                self.report(rollout)
        finally:
            self.reporter.set_stage("stopping")
            if rollout is not None:
                self.report(rollout, force=True)
                rollout.close()
            else:
                for world in worlds:
                    world.close()
            for link in self.links.values():
                link.close()
            if self.channel:
                self.channel.close()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def report(self, rollout: MultiAgentRollout, force: bool = False) -> None:
        """Heartbeat counters per policy and per agent; each finished agent episode goes to the supervisor."""
        self.new_agent_episodes.extend(rollout.new_episodes)
        rollout.new_episodes.clear()
        del self.new_agent_episodes[:-MAX_UNREPORTED_EPISODES]
        now = time.monotonic()
        if not force and now < self.reporter.next_beat:
            return
        links = self.links.values()
        counters: dict[str, float] = {
            "env_steps": rollout.env_steps, "episodes": rollout.episodes,
            "version": min((link.version for link in links), default=-1),
            "batches_sent": sum(link.backlog.sent for link in links),
            "batches_dropped": sum(link.backlog.dropped for link in links),
            "backlog": sum(len(link.backlog) for link in links),
        }
        returns = rollout.recent_returns()
        if returns:
            counters["return_mean"] = float(np.mean(list(returns.values())))
            if now >= self.next_returns_log:
                self.next_returns_log = now + RETURNS_LOG_INTERVAL_S
                log.info("mean return of recent episodes per agent: %s",
                         ", ".join(f"{agent} {value:.2f}" for agent, value in sorted(returns.items())))
        counters.update({f"return.{agent}": value for agent, value in returns.items()})
        for policy, link in self.links.items():
            counters.update({f"version.{policy}": link.version, f"batches_sent.{policy}": link.backlog.sent,
                             f"batches_dropped.{policy}": link.backlog.dropped})
        self.reporter.update(counters)
        if self.channel and self.new_agent_episodes:
            episodes = self.new_agent_episodes
            self.channel.send("episodes", {
                "returns": [r for _, r, _ in episodes], "lengths": [n for _, _, n in episodes],
                "agents": [a for a, _, _ in episodes], "version": counters["version"],
            })
            self.new_agent_episodes = []
        if force:
            self.reporter.next_beat = 0.0
        self.reporter.tick(now)
