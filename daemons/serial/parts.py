"""The three sides of a serial run, each the daemon's own code path with the sockets taken out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tandem.daemons.acting.stepping import actor_envs, actor_seed, env_builder, make_stepping
from tandem.daemons.actor.exploration import actor_epsilons, decayed
from tandem.daemons.actor.warmup import UniformActions, explore_or_warm_up, uniform_warmup
from tandem.daemons.algorithms import make_policy
from tandem.daemons.algorithms.base import Policy, act_with
from tandem.daemons.envs.gym_envs import build_each
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.evaluator.rounds import evaluator_policy_seed, make_rounds, round_counters, round_seed
from tandem.daemons.learner.intake import Intake
from tandem.daemons.learner.progress import Progress
from tandem.daemons.learner.training import Training
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import TransitionBatch


def no_stage(stage: str) -> None:
    """Env construction in serial mode has no supervisor to report its stages to."""


def no_heartbeat() -> None:
    """A long update in serial mode has no supervisor to keep informed either."""


class SerialActor:
    """The actor's stepping and exploration: `unrolls()` ticks the envs until whole TransitionBatches are out."""

    def __init__(self, config: RunConfig):
        self.config = config
        seed = actor_seed(config, 0)
        api, build = actor_envs(config, seed)
        self.stepping = make_stepping(build(no_stage), api, config, "serial-actor", seed, incarnation=0)
        self.spaces: PolicySpaces = self.stepping.spaces[DEFAULT_POLICY]
        s = self.spaces
        self.policy: Policy = make_policy(config, s.observation_space, s.action_space, seed, s.mask_size)
        a = config.actors
        self.base_epsilons = actor_epsilons(a.explore.epsilon, a.explore.epsilon_alpha, 0, 1, len(self.stepping))
        # uniform actions while the weights are the untrained version 0, as the actor daemon does (SAC)
        self.warmup = UniformActions(s.action_space, seed) if uniform_warmup(config) else None
        self.version = -1

    @property
    def env_steps(self) -> int:
        return self.stepping.env_steps

    def load(self, version: int, weights: Mapping[str, np.ndarray]) -> None:
        """New weights, swapped in between unrolls (the only place `unrolls` leaves the stepping)."""
        self.policy.load_weights(weights)
        self.version = version

    def unrolls(self) -> list[TransitionBatch]:
        stepping = self.stepping
        epsilons = decayed(self.base_epsilons, stepping.env_steps, self.config.actors.explore.epsilon_decay_steps)

        def choose(
            policy: str, obs: np.ndarray, env_index: np.ndarray, state: np.ndarray | None = None
        ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            return explore_or_warm_up(self.policy, self.warmup, self.version, obs, epsilons[env_index], state)

        while True:
            stepping.tick(choose, {DEFAULT_POLICY: self.version})
            if stepping.outbox and stepping.at_boundary():
                out = list(stepping.outbox)
                stepping.outbox.clear()
                return out

    def recent_return(self) -> float | None:
        return self.stepping.recent_return_mean()

    def close(self) -> None:
        self.stepping.close()


class SerialLearner:
    """The learner's training (algorithm, feed, check), progress and intake; batches go in as the frames an actor
    would have sent. `training` and `progress` are the learner daemon's own objects, so its checkpointer saves them."""

    def __init__(self, config: RunConfig, spaces: PolicySpaces):
        self.progress = Progress()
        self.progress.version = 0  # a serial run starts fresh: the daemon's first version without a checkpoint
        self.counts = self.progress.counts
        self.training = Training(config, spaces, config.learner.device, self.counts, heartbeat=no_heartbeat)
        self.algorithm, self.feed = self.training.algorithm, self.training.feed
        self.intake = Intake(
            self.feed,
            self.training.feed_lock,
            DEFAULT_POLICY,
            self.training.check_content,
            config.learner.max_lag,
            lambda: self.version,
            self.counts,
        )

    @property
    def version(self) -> int:
        return self.progress.version

    @property
    def updates(self) -> int:
        return int(self.counts["updates"])

    @property
    def metrics(self) -> dict[str, float]:
        """The last update's diagnostics (loss, entropy, ..., sample_lag_mean)."""
        return self.training.last_metrics

    def receive(self, batch: TransitionBatch) -> None:
        """Through the learner's decode, checks and insert, as if it had come over the wire."""
        self.intake.handle(batch.to_frames())

    def train(self) -> bool:
        """Updates while the inserted transitions pay for them; True if a new version was published."""
        published = False
        inserted = self.counts["transitions_inserted"]
        while self.updates < inserted / self.feed.consumed_per_update:
            payload = self.training.next_payload(self.version)
            if payload is None:
                break
            self.training.train(payload, self.version)
            if self.updates % self.feed.publish_every == 0:
                self.progress.version += 1
                published = True
        return published

    def weights(self) -> dict[str, np.ndarray]:
        return self.algorithm.weights()


class SerialEvaluator:
    """The evaluator's rounds: greedy episodes from seeded resets with a policy of its own."""

    def __init__(self, config: RunConfig):
        self.config = config
        api, build_one = env_builder(config, training=False)
        self.num_envs = min(config.eval.num_envs, config.eval.window_episodes)
        self.rounds = make_rounds(build_each(self.num_envs, build_one, no_stage), api, config)
        s = self.rounds.spaces[DEFAULT_POLICY]
        seed = evaluator_policy_seed(config, 0)
        self.policy: Policy = make_policy(config, s.observation_space, s.action_space, seed, s.mask_size)
        self.played = 0

    def evaluate(self, version: int, weights: Mapping[str, np.ndarray]) -> dict[str, float]:
        """One round with `weights`: eval_return, eval_return_min, eval_version."""
        self.policy.load_weights(weights)
        epsilon = self.config.eval.epsilon

        def choose(
            policy: str, obs: np.ndarray, env_index: np.ndarray, state: np.ndarray | None = None
        ) -> tuple[np.ndarray, dict[str, Any]]:
            return act_with(self.policy, obs, np.full(len(obs), epsilon), state), {}

        seed = round_seed(self.config, self.played)
        returns = self.rounds.play_round(choose, seed, lambda: False, lambda: None)
        self.played += 1
        return round_counters(returns or {}, self.rounds.spaces, {DEFAULT_POLICY: version})

    def close(self) -> None:
        self.rounds.close()
