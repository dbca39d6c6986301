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
from tandem.daemons.envs.dict_obs import DictObs, is_dict_space, key_spaces
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.protocol import keyed

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
        from tandem.daemons.algorithms.entity_norm import with_fresh_statistics

        module = self.module
        # a plug-in's policy that keeps its network elsewhere: its weights are the ones it was loaded with
        self.loaded_weights = dict(weights) if module is None else None
        try:
            self.net.load_weights(with_fresh_statistics(module, weights))
        except ValueError as exc:
            raise PolicyError(
                f"{spec.source}: the saved weights do not fit policy {spec.name!r}'s model: {exc}"
            ) from exc
        self.epsilon_greedy = algorithm_of(spec.config).epsilon_greedy
        self.obs_dtype = np.dtype(spec.observation_space.dtype or np.float32)
        self.obs_shape = tuple(spec.observation_space.shape or ())
        self.state_size = spec.config.model.core_state_size()  # > 0: a recurrent core (model.core)
        self.held_state: np.ndarray | None = None  # the state `act` keeps when its caller passes none

    name = property(lambda self: self.spec.name)
    algorithm = property(lambda self: self.spec.algorithm)
    version = property(lambda self: self.spec.version)
    observation_space = property(lambda self: self.spec.observation_space)
    action_space = property(lambda self: self.spec.action_space)

    @property
    def recurrent(self) -> bool:
        """The policy has a recurrent core: each action depends on the observations before it, via a state."""
        return self.state_size > 0

    def initial_state(self, batch: int = 1) -> np.ndarray:
        """The state [batch, S] float32 an episode starts from (zeros), for `act(..., state=...)`."""
        if not self.recurrent:
            raise PolicyError(f"policy {self.name!r} is feed-forward (model.core = 'none'): it keeps no state")
        return np.zeros((batch, self.state_size), np.float32)

    def reset(self, envs: Any = None) -> None:
        """Forget the state `act` keeps for callers that pass none: all of it, or the rows `envs` (episodes that
        start again). Call it at every episode's start; a feed-forward policy has nothing to forget."""
        if self.held_state is not None:
            if envs is None:
                self.held_state = None
            else:
                self.held_state[np.asarray(envs)] = 0.0

    def act(
        self, obs: Any, sample: bool = False, epsilon: float = DQN_SAMPLE_EPSILON, state: np.ndarray | None = None
    ) -> Any:
        """The action for one observation, or actions [B, ...] for a batch [B, *obs_shape], as the env takes them.

        Greedy by default (the most likely action; a Gaussian's mean, clipped to the Box). `sample=True`
        draws from an on-policy algorithm's distribution, or acts epsilon-greedy (`epsilon`) for Q-learning.
        An observation with an action mask may be given as the env's dict (observation, action_mask).

        A recurrent policy (`recurrent`) acts from a state per env: pass `state` ([B, S] from `initial_state(B)`;
        it is advanced in place, and zeroed by you where an episode starts), or pass none and the policy keeps
        one for you, for one caller (`reset()` it at each episode's start).
        """
        from tandem.daemons.envs.spaces import env_actions

        batch, single = self.as_batch(obs)
        chance = 0.0 if not sample else (epsilon if self.epsilon_greedy else 1.0)
        chances = np.full(keyed.row_count(batch), chance)
        if self.recurrent:
            state = self.state_for(keyed.row_count(batch), state)
            chosen = self.net.act(batch, chances, state=state)
        elif state is not None:
            raise PolicyError(f"policy {self.name!r} is feed-forward (model.core = 'none'): it takes no state")
        else:
            chosen = self.net.act(batch, chances)
        actions = env_actions(self.action_space, np.asarray(chosen))
        return actions[0] if single else actions

    def state_for(self, rows: int, state: np.ndarray | None) -> np.ndarray:
        """The caller's state, checked, or the one this policy keeps (fresh when the batch size changes)."""
        if state is None:
            if self.held_state is None or len(self.held_state) != rows:
                self.held_state = self.initial_state(rows)
            return self.held_state
        if not isinstance(state, np.ndarray) or state.dtype != np.float32 or state.shape != (rows, self.state_size):
            got = f"{state.dtype} {list(state.shape)}" if isinstance(state, np.ndarray) else type(state).__name__
            raise PolicyError(
                f"policy {self.name!r} needs its state as float32 [{rows}, {self.state_size}] (initial_state({rows})), "
                f"got {got}"
            )
        return state

    def as_batch(self, obs: Any) -> tuple[np.ndarray, bool]:
        """(observations [B, ...], whether one observation was given)."""
        if is_dict_space(self.observation_space):
            return self.keyed_batch(obs)
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

    def keyed_batch(self, obs: Any) -> tuple[dict[str, np.ndarray], bool]:
        """A Dict observation (the env's dict, a list of them, or a dict of batches [B, ...] per key) as
        ({key: [B, ...]}, whether one observation was given)."""
        as_dict = DictObs(self.observation_space)
        one = tuple if as_dict.tuple else Mapping  # what one observation is: the env's tuple, or its dict
        if isinstance(obs, list) and obs and isinstance(obs[0], one):
            return keyed.stack([as_dict(o) for o in obs]), False
        if not isinstance(obs, one):
            raise ValueError(
                f"policy {self.name!r} takes {'Tuple' if as_dict.tuple else 'Dict'} observations "
                f"(keys {', '.join(as_dict.dtypes)}): one {one.__name__}, a list of them, or batches per key"
            )
        arrays = as_dict(obs)
        key, first = next(iter(arrays.items()))
        shape = tuple(key_spaces(self.observation_space)[key].shape or ())
        if first.shape == shape:
            return {k: a[None] for k, a in arrays.items()}, True
        if first.shape[1:] != shape:
            raise ValueError(
                f"observation key {key!r} of shape {list(first.shape)} is neither one observation {list(shape)} "
                f"nor a batch [B, {', '.join(map(str, shape))}]"
            )
        return arrays, False

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

    @property
    def module(self) -> Any:
        """The torch network the policy acts with (a built-in policy's `nets.current`); None where a plug-in's
        policy keeps its network elsewhere."""
        return getattr(getattr(self.net, "nets", None), "current", None)

    def weights(self) -> dict[str, np.ndarray]:
        """The network's tensors as numpy arrays, as a learner publishes them."""
        from tandem.daemons.algorithms.torch_util import module_weights

        module = self.module
        return dict(self.loaded_weights or {}) if module is None else module_weights(module)
