"""An actor's links to its policies' learners: found, waited on for first weights, followed when they move."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tandem.daemons.acting.follow import LearnerFollower
from tandem.daemons.acting.link import FollowedPolicy, PolicyLink
from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import TransitionBatch

WAIT_WEIGHTS_POLL_S = 0.01
SEED_STRIDE = 7919  # between the exploration seeds of one actor's policies: above any actor count, so no two meet


class LearnerLinks(Mapping[str, PolicyLink]):
    """One PolicyLink per policy (network, weights, push socket, backlog), read like a dict of them.

    Shared by the env-stepping actor and the action server:

        links.connect(stepping.spaces)       # each policy's learner, asked of the supervisor
        links.wait_weights(report)           # every policy's first version
        while running:
            links.follow()                   # a learner silent for a while may have moved
            links.push(stepping.outbox); links.flush()
    """

    def __init__(self, runtime: DaemonRuntime, config: RunConfig, index: int):
        self.runtime, self.config, self.index = runtime, config, index
        self.links: dict[str, PolicyLink] = {}
        # policies whose weights (and pool) this actor follows without sending them anything: a self-play league's
        # other members, whose pooled versions it plays against
        self.watched: dict[str, FollowedPolicy] = {}
        self.follower = LearnerFollower(runtime.channel, config.actors.relookup_after_s, index)

    def __getitem__(self, policy: str) -> PolicyLink:
        return self.links[policy]

    def __iter__(self) -> Iterator[str]:
        return iter(self.links)

    def __len__(self) -> int:
        return len(self.links)

    def add(self, policy: str, link: Any) -> None:
        """`policy`'s link (`connect` makes them; a test may hand in a stand-in)."""
        self.links[policy] = link

    def connect(self, spaces: Mapping[str, PolicySpaces]) -> None:
        """A link to each policy's learner, wherever the supervisor says it is."""
        self.runtime.reporter.set_stage("connect")
        for n, (policy, policy_spaces) in enumerate(spaces.items()):
            pconf = policy_config(self.config, policy)
            endpoints = self.runtime.find_learner(pconf, policy, self.index)
            seed = self.config.run.seed + self.index + SEED_STRIDE * n
            self.add(
                policy, PolicyLink(self.runtime.ctx, pconf, policy, policy_spaces, endpoints, self.runtime.name, seed)
            )

    def watch(self, policy: str, spaces: PolicySpaces) -> FollowedPolicy:
        """`policy`'s weights followed (polled by the caller), moved with its learner; nothing is sent to it."""
        if policy in self.links:
            return self.links[policy].followed
        if policy not in self.watched:
            pconf = policy_config(self.config, policy)
            endpoints = self.runtime.find_learner(pconf, policy, self.index)
            self.watched[policy] = FollowedPolicy(
                self.runtime.ctx, pconf, policy, spaces, endpoints, self.runtime.name, seed=None
            )
        return self.watched[policy]

    def wait_weights(self, report: Callable[[], None]) -> None:
        """Until every policy has its first version (or a stop), following learners and reporting meanwhile."""
        self.runtime.reporter.set_stage("wait_weights")
        while not self.runtime.stop and any(link.version < 0 for link in self.links.values()):
            for link in self.links.values():
                link.poll_weights()
            self.follow()
            report()
            time.sleep(WAIT_WEIGHTS_POLL_S)

    def follow(self) -> None:
        """A learner silent for a while may have moved (restarted elsewhere): ask, and follow it."""

        def move(policy: str, endpoints: Any) -> None:
            if policy in self.links:
                self.links[policy].reconnect(self.runtime.ctx, policy_config(self.config, policy), endpoints)
            else:
                self.watched[policy].reconnect(endpoints)

        followed = {**self.watched, **{p: link.followed for p, link in self.links.items()}}
        self.follower.check(followed, time.monotonic(), move)

    def versions(self) -> dict[str, int]:
        """The version each policy acts with now (what each new batch carries)."""
        return {policy: link.version for policy, link in self.links.items()}

    def push(self, outbox: list[TransitionBatch], sent: Callable[[TransitionBatch], None] | None = None) -> None:
        """Every finished unroll into its policy's backlog (`sent` is told of each), then the outbox is empty."""
        for batch in outbox:
            self.links[batch.policy_id].push(batch)
            if sent is not None:
                sent(batch)
        outbox.clear()

    def flush(self) -> None:
        """Send what each push socket takes now; never blocks."""
        for link in self.links.values():
            link.flush()

    def weight_sockets(self) -> list:
        """Every socket a new weight version may arrive on (to wait on while paced)."""
        return [sock for link in self.links.values() for sock in link.weight_sockets()]

    def counters(self) -> dict[str, Any]:
        """The links' share of an actor's heartbeat: versions, batches sent and dropped, weights received."""
        links = self.links.values()
        return {
            "version": min((link.version for link in links), default=-1),
            "batches_sent": sum(link.backlog.sent for link in links),
            "batches_dropped": sum(link.backlog.dropped for link in links),
            "backlog": sum(len(link.backlog) for link in links),
        }

    def details(self) -> dict[str, Any]:
        """Lookups and moves of learners, the summed weight-client counters, each policy's version and batches."""
        counters: dict[str, Any] = dict(self.follower.counts)
        for link in self.links.values():
            for key, value in link.followed.weights.counters.items():
                counters[key] = counters.get(key, 0) + value
            counters.update(
                {
                    f"version.{link.policy_id}": link.version,
                    f"batches_sent.{link.policy_id}": link.backlog.sent,
                    f"batches_dropped.{link.policy_id}": link.backlog.dropped,
                }
            )
        return counters

    def close(self) -> None:
        for link in self.links.values():
            link.close()
        for followed in self.watched.values():
            followed.close()
