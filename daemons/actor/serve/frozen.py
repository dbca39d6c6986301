"""`tandem serve`: an action server for a trained policy, with no learner and no training (games in production, or
play against people). The same protocol, checks and batching as a run's action server (GameServer); the weights
never change, nothing is sent anywhere, and a status line goes to stdout instead of a heartbeat."""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from tandem.daemons.actor.serve.server import GameServer
from tandem.daemons.actor.serve.stats import server_counters
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.settings.schema import RunConfig

STATUS_EVERY_S = 5.0


class FrozenActing:
    """A trained policy where a server's link keeps its acting network: greedy (or sampled) actions, no extras."""

    def __init__(self, policy: Any, sample: bool):
        self.policy, self.sample = policy, sample

    def explore(self, obs: Any, epsilons: np.ndarray, state: np.ndarray | None = None):
        return self.policy.act(obs, sample=self.sample, state=state), {}


class FrozenLink:
    """A policy link whose weights never change: the server acts with `net` and reports `version`."""

    def __init__(self, policy: Any, sample: bool):
        self.net, self.version = FrozenActing(policy, sample), int(policy.version)

    def poll_weights(self) -> bool:
        return False


class FrozenLinks:
    """What a server's learner links do, for weights that never change: one version, nothing sent."""

    def __init__(self, policy: Any, sample: bool):
        self.link = FrozenLink(policy, sample)

    def __getitem__(self, policy: str) -> Any:
        return self.link

    def connect(self, spaces: Any) -> None:
        """Nothing to connect to."""

    def wait_weights(self, report: Any) -> None:
        """The weights are here already."""

    def follow(self) -> None:
        """No learner to follow."""

    def push(self, outbox: list) -> None:
        outbox.clear()  # no learner takes the unrolls: they are not kept

    def flush(self) -> None:
        """Nothing queued."""

    def close(self) -> None:
        """No sockets of its own."""


class StatusLine:
    """Every STATUS_EVERY_S seconds, one line on stdout: games, requests/s, batch, latency, refusals."""

    def __init__(self, server: GameServer, policy: Any):
        self.server, self.policy, self.next_at = server, policy, 0.0

    def send(self, games: Any, force: bool = False) -> None:
        now = time.monotonic()
        if games is None or (now < self.next_at and not force):
            return
        self.next_at = now + STATUS_EVERY_S
        s = self.server
        c = server_counters(s.stats, games, s.endpoint, now)
        sys.stdout.write(
            f"serving {self.policy.name!r} version {self.policy.version} at {s.endpoint}: {c['games']} games, "
            f"{c['streams']} streams, {c['serve_requests_per_s']:.0f} requests/s, batch {c['serve_batch_mean']:.1f}, "
            f"p99 {c.get('serve_latency_p99_ms', 0.0):.1f} ms, {c['game_errors']} refused\n"
        )
        sys.stdout.flush()


class FixedPolicy:
    """What a GameServer serving `policy` with its weights fixed uses instead of learner links and a heartbeat."""

    def __init__(self, policy: Any, sample: bool):
        spec = policy.spec
        self.policy = policy
        self.links = FrozenLinks(policy, sample)
        self.spaces = PolicySpaces((), spec.observation_space, spec.action_space, spec.mask_size)

    def status(self, server: GameServer) -> StatusLine:
        return StatusLine(server, self.policy)


def frozen_server(config: RunConfig, policy: Any, stop: StopFlag, sample: bool = False, insecure: bool = False):
    """A GameServer for `policy` (a TrainedPolicy), its weights fixed; `config.run.dir` holds its endpoint file
    (games/actor-0.endpoint) and stream ids, so `find_endpoint(run_dir)` finds it."""
    return GameServer(config, 0, stop, None, insecure=insecure, fixed=FixedPolicy(policy, sample))
