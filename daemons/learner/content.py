"""What a well-framed batch must also be to be trained on: its policy's shapes, dtypes, finite numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from tandem.daemons.envs.dict_obs import is_dict_space, key_dtype, key_spaces
from tandem.daemons.learner.intake import BadBatch
from tandem.protocol import TransitionBatch


class BatchContentCheck:
    """Raises ValueError naming the field when a batch disagrees with the policy (PROTOCOL.md 2.1.3).

    The frame checks of `TransitionBatch.from_frames` know nothing of the policy; these do. Each one guards
    something that would otherwise fail later, far from the sender: a replay column of another shape, an
    unsafe cast into the replay's dtype (floats into uint8 frames), or a NaN that turns every weight NaN.
    """

    def __init__(self, obs_shape: tuple[int, ...], obs_dtype: Any, algorithm_check: Any):
        self.obs_shape, self.obs_dtype, self.algorithm_check = tuple(obs_shape), np.dtype(obs_dtype), algorithm_check
        self.keys: dict[str, tuple[tuple[int, ...], np.dtype]] | None = None  # a Dict observation's, per key
        self.action_shape: tuple[int, ...] | None = None  # one action's shape; None: left to the algorithm
        self.state_size: int | None = None  # floats of recurrent state per env (0: feed-forward); None: left to it

    @classmethod
    def of_space(
        cls, space: Any, algorithm_check: Any, action_space: Any = None, state_size: int | None = None
    ) -> BatchContentCheck:
        """The check for a policy observing `space` (a Dict one is checked key by key), acting in `action_space`
        (a space without one shape, a Tuple's, leaves its actions to the algorithm) with a recurrent state of
        `state_size` floats per env (0: feed-forward)."""
        check = cls(tuple(space.shape or ()), space.dtype or np.float32, algorithm_check)
        if is_dict_space(space):
            check.keys = {key: (tuple(sub.shape or ()), key_dtype(sub)) for key, sub in key_spaces(space).items()}
        if action_space is not None and action_space.shape is not None:
            check.action_shape = tuple(action_space.shape)
        check.state_size = state_size
        return check

    def __call__(self, batch: TransitionBatch) -> None:
        if self.keys is not None or batch.keyed:
            self.check_keys(batch)
        else:
            self.check_array(batch)
        if not np.isfinite(batch.rewards).all():
            raise BadBatch("values", "rewards hold NaN or infinite values")
        self.check_contract(batch)
        self.algorithm_check(batch)

    def check_contract(self, batch: TransitionBatch) -> None:
        """Check 8's part that every algorithm shares: whole actions of the action space's shape (replay stores
        one action per row: an extra axis of 1 would fail there, on the intake thread), and a recurrent state
        exactly when the policy has one, of its width (PROTOCOL.md 2.1.3)."""
        want = (batch.num_steps, batch.num_envs, *(self.action_shape or ()))
        if self.action_shape is not None and batch.actions.shape != want:
            raise BadBatch(
                "algorithm", f"actions must be {list(want)} ([T, K, *action_shape]), got {list(batch.actions.shape)}"
            )
        state, size = batch.core_state, self.state_size
        if size is None:
            return
        if size == 0 and state is not None:
            raise BadBatch("algorithm", "core_state was sent, but this policy is feed-forward (model.core = 'none')")
        if size and state is None:
            raise BadBatch("algorithm", f"core_state is missing: this policy's recurrent core needs [K, {size}]")
        if size and state.shape != (batch.num_envs, size):
            raise BadBatch("algorithm", f"core_state must be [K={batch.num_envs}, {size}], got {list(state.shape)}")

    def check_keys(self, batch: TransitionBatch) -> None:
        """A Dict observation's batch: the policy's keys, each of its shape and dtype, finite floats."""
        if self.keys is None:
            raise BadBatch("obs_shape", f"obs are keyed ({', '.join(batch.obs)}), this policy observes one array")
        if not batch.keyed or set(batch.obs) != set(self.keys):
            got = ", ".join(batch.obs) if batch.keyed else "one array"
            raise BadBatch("obs_shape", f"obs keys are {got}, this policy's are {', '.join(self.keys)}")
        histories = batch.obs_history if batch.obs_stacks else {}
        for key, (shape, dtype) in self.keys.items():
            obs, final = batch.obs[key], batch.final_obs[key]
            if batch.key_shape(key) != shape:  # a stacked key's frames count as their stacks (PROTOCOL.md 2.1.5)
                raise BadBatch(
                    "obs_shape", f"obs.{key} is {list(batch.key_shape(key))} per step, this policy's {list(shape)}"
                )
            if not np.can_cast(obs.dtype, dtype, casting="same_kind"):
                raise BadBatch("obs_dtype", f"obs.{key} is {obs.dtype}, this policy's {dtype}")
            arrays = (obs, final, histories[key]) if key in histories else (obs, final)
            if obs.dtype.kind == "f" and not all(np.isfinite(a).all() for a in arrays):
                raise BadBatch("values", f"obs.{key}, final_obs.{key} or obs_history.{key} hold NaN or infinite values")

    def check_array(self, batch: TransitionBatch) -> None:
        if batch.obs_shape != self.obs_shape:  # a stacked batch's frames count as their stacks (PROTOCOL.md 2.1.2)
            raise BadBatch(
                "obs_shape",
                f"obs are {list(batch.obs_shape)} per step, this policy's observations are {list(self.obs_shape)}",
            )
        if not np.can_cast(batch.obs.dtype, self.obs_dtype, casting="same_kind"):
            raise BadBatch(
                "obs_dtype",
                f"obs are {batch.obs.dtype}, this policy's observations are {self.obs_dtype} "
                "(only a cast within the same kind is taken, e.g. float64 to float32)",
            )
        if batch.obs.dtype.kind == "f":
            for name in ("obs", "final_obs"):
                if not np.isfinite(getattr(batch, name)).all():
                    raise BadBatch("values", f"{name} hold NaN or infinite values")
            history = batch.obs_history
            if history is not None and not np.isfinite(history).all():
                raise BadBatch("values", "obs_history holds NaN or infinite values")
