"""A trained policy's network with its weights: `act(obs)` for one observation or a batch, greedy by default.

Loading (from a run, a checkpoint or an export) lives in tandem.client.api.policy and tandem.client.api.export.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tandem.daemons.config import RunConfig
from tandem.daemons.runtime.exit_codes import ExitCode

DQN_SAMPLE_EPSILON = 0.05  # Q-learning has no distribution to sample: sample=True acts epsilon-greedy


class PolicyError(Exception):
    """A policy cannot be loaded or exported; the message says why, `code` is the exit code for the CLI."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILURE):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class PolicySpec:
    """What rebuilds a policy's network without its env: algorithm, spaces and the policy's own config."""

    name: str
    config: RunConfig  # the policy's config: [policies.NAME] overrides merged in
    observation_space: Any  # as the network sees it (a Dict with an action mask is already flattened)
    action_space: Any
    mask_size: int  # > 0: observations end with this many action-mask entries
    version: int  # the weight version of the checkpoint
    source: str  # where the weights came from, for messages
    evaluation: dict | None = None  # the evaluator's record of a best or solved checkpoint (return, round, ...)

    @property
    def algorithm(self) -> str:
        return self.config.algorithm.name


class TrainedPolicy:
    """A policy's network with trained weights: `act(obs)` for one observation or a batch, greedy by default."""

    def __init__(
        self, spec: PolicySpec, weights: Mapping[str, np.ndarray], device: str = "cpu", seed: int | None = None
    ):
        from tandem.daemons.algorithms import algorithm_of, make_policy

        self.spec = spec
        config = dataclasses.replace(spec.config, actors=dataclasses.replace(spec.config.actors, device=device))
        try:
            self.net = make_policy(
                config, spec.observation_space, spec.action_space, seed=seed, mask_size=spec.mask_size
            )
        except ValueError as exc:
            raise PolicyError(f"{spec.source}: cannot build policy {spec.name!r}: {exc}") from exc
        try:
            self.net.load_weights(weights)
        except ValueError as exc:
            raise PolicyError(
                f"{spec.source}: the saved weights do not fit policy {spec.name!r}'s model: {exc}"
            ) from exc
        self.epsilon_greedy = algorithm_of(spec.config).epsilon_greedy
        self.obs_dtype = np.dtype(spec.observation_space.dtype or np.float32)
        self.obs_shape = tuple(spec.observation_space.shape or ())

    name = property(lambda self: self.spec.name)
    algorithm = property(lambda self: self.spec.algorithm)
    version = property(lambda self: self.spec.version)
    observation_space = property(lambda self: self.spec.observation_space)
    action_space = property(lambda self: self.spec.action_space)

    def act(self, obs: Any, sample: bool = False, epsilon: float = DQN_SAMPLE_EPSILON) -> Any:
        """The action for one observation, or actions [B, ...] for a batch [B, *obs_shape], as the env takes them.

        Greedy by default (the most likely action; a Gaussian's mean, clipped to the Box). `sample=True`
        draws from an on-policy algorithm's distribution, or acts epsilon-greedy (`epsilon`) for Q-learning.
        An observation with an action mask may be given as the env's dict (observation, action_mask).
        """
        from tandem.daemons.envs.spaces import env_actions

        batch, single = self.as_batch(obs)
        chance = 0.0 if not sample else (epsilon if self.epsilon_greedy else 1.0)
        actions = env_actions(self.action_space, np.asarray(self.net.act(batch, np.full(len(batch), chance))))
        return actions[0] if single else actions

    def as_batch(self, obs: Any) -> tuple[np.ndarray, bool]:
        """(observations [B, ...], whether one observation was given)."""
        if isinstance(obs, Mapping):
            return self.flatten_masked(obs)[None], True
        if isinstance(obs, (list, tuple)) and obs and isinstance(obs[0], Mapping):
            return np.stack([self.flatten_masked(o) for o in obs]), False
        array = np.asarray(obs, dtype=self.obs_dtype)
        if array.shape == self.obs_shape:
            return array[None], True
        if array.ndim == len(self.obs_shape) + 1 and array.shape[1:] == self.obs_shape:
            return array, False
        raise ValueError(
            f"an observation of shape {list(array.shape)} is neither one observation "
            f"{list(self.obs_shape)} nor a batch [B, {', '.join(map(str, self.obs_shape))}]"
        )

    def flatten_masked(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The env's dict observation as the network takes it (as tandem.daemons.envs.spaces.ObsAdapter makes it)."""
        if not self.spec.mask_size or set(obs) != {"observation", "action_mask"}:
            raise ValueError(
                f"policy {self.name!r} takes array observations of shape {list(self.obs_shape)}, "
                f"not a dict with keys {sorted(obs)}"
            )
        return np.concatenate(
            [
                np.asarray(obs["observation"], np.float32).reshape(-1),
                np.asarray(obs["action_mask"], np.float32).reshape(-1),
            ]
        )

    def weights(self) -> dict[str, np.ndarray]:
        """The network's tensors as numpy arrays, as a learner publishes them."""
        from tandem.daemons.algorithms.torch_util import module_weights

        return module_weights(self.net.nets.current)
