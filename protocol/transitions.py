"""`TransitionBatch`: an unroll of T steps from K environments, in columns, each observation sent once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tandem.protocol import framing, keyed, ragged
from tandem.protocol.errors import ProtocolError
from tandem.protocol.limits import DEFAULT_LIMITS, Limits

CORE_ARRAYS = ("obs", "actions", "rewards", "terminated", "truncated", "final_obs")
KEYED_ARRAYS = ("obs", "final_obs")  # a Dict observation's keys travel as obs.KEY and final_obs.KEY (PROTOCOL.md 2.1.4)
MAX_EXTRAS = 16
MAX_OBS_STACK = 64  # frames per stacked observation a receiver accepts
STACK_HISTORY = "obs_history"  # the earlier frames of obs[0]'s stacks, in a stacked batch (PROTOCOL.md 2.1.2)
KEY_STACKS = "obs_stacks"  # frames per observation of each stacked key of a Dict observation (PROTOCOL.md 2.1.5)
CORE_STATE = "core_state"  # the recurrent state each env's first step acted from (PROTOCOL.md 2.1.3)
MAX_CORE_STATE = 65536  # floats of recurrent state per env a receiver accepts
GAMES = "games"  # self-play results the sender saw since its last batch (PROTOCOL.md 2.1.6)
MAX_GAMES = 4096
MAX_POLICY_NAME = 64  # characters of the opponent policy named in a league game (2.1.6)
SCORES = (0.0, 0.5, 1.0)
HEADER_FIELDS = {
    "policy_id": framing.string,
    "actor_id": framing.string,
    "incarnation": framing.count,
    "seq": framing.count,
    "policy_version": framing.version_or_none,
    "env_steps": framing.count,
}


@dataclass(frozen=True, eq=False)
class TransitionBatch:
    """Steps t = 0..T-1 of envs k = 0..K-1.

    `obs[t, k]` is what env k showed before `actions[t, k]`; `obs[T]` is the observation after the last
    step. Where `terminated[t, k]` or `truncated[t, k]` is set, the episode ended at that step and
    `obs[t + 1, k]` is the first observation of the next episode. The last observation of each truncated
    episode (needed to bootstrap) is in `final_obs`, one row per set `truncated` entry in row-major (t, k)
    order. Terminated episodes need no final observation.
    """

    policy_id: str
    actor_id: str
    incarnation: int
    seq: int
    policy_version: int
    env_steps: int
    obs: np.ndarray  # [T+1, K, *obs_shape]
    actions: np.ndarray  # [T, K, *action_shape]
    rewards: np.ndarray  # [T, K], a float dtype
    terminated: np.ndarray  # [T, K], bool
    truncated: np.ndarray  # [T, K], bool
    final_obs: np.ndarray  # [truncated.sum(), *obs_shape], obs dtype
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)  # name -> [T, K, ...], e.g. behaviour logits
    # Frame stacks sent once (PROTOCOL.md 2.1.2): with obs_stack S > 1, obs and final_obs hold only the newest
    # frame of each observation and obs_history [K, S-1, *frame] the earlier frames of obs[0]'s stacks;
    # tandem.protocol.stacks rebuilds the whole stacks. A Dict observation's stacked keys (PROTOCOL.md 2.1.5) are
    # named with their S in obs_stacks, obs_stack stays 1, and obs_history is a dict of those keys' histories.
    obs_stack: int = 1
    obs_history: np.ndarray | dict[str, np.ndarray] | None = None
    obs_stacks: Mapping[str, int] = field(default_factory=dict)
    # A recurrent policy's unroll (PROTOCOL.md 2.1.3): core_state [K, S] float32, the state env k's policy acted
    # from at step 0 (zeros where obs[0, k] starts an episode); None for a feed-forward policy's.
    core_state: np.ndarray | None = None
    # Self-play (PROTOCOL.md 2.1.6): (opponent version, the learning side's score) of games finished since the
    # sender's last batch of this policy; -1 is the live policy itself. A league's game against a version of
    # another policy adds that policy's name: (version, score, policy). Empty for every other batch.
    games: tuple[tuple, ...] = ()

    KIND = "transition_batch"

    @property
    def keyed(self) -> bool:
        """The observations are a dict of arrays, one per key of a Dict space (PROTOCOL.md 2.1.4)."""
        return keyed.is_keyed(self.obs)

    @property
    def framed(self) -> bool:
        """Some observations came as their newest frames, each frame once (PROTOCOL.md 2.1.2 and 2.1.5)."""
        return self.obs_stack > 1 or bool(self.obs_stacks)

    def key_shape(self, key: str) -> tuple[int, ...]:
        """The shape of key `key` of one observation as the env made it (a stacked key's frames stacked again)."""
        frame = tuple(self.obs[key].shape[2:])
        stack = self.obs_stacks.get(key, 1)
        return (stack, *frame) if stack > 1 else frame

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """The shape of one observation as the env made it (a stacked batch's frames stacked again); () for keyed
        observations, whose shapes are per key."""
        if self.keyed:
            return ()
        frame = tuple(self.obs.shape[2:])
        return (self.obs_stack, *frame) if self.obs_stack > 1 else frame

    @property
    def num_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.actions.shape[1])

    @property
    def num_transitions(self) -> int:
        return self.num_steps * self.num_envs

    def check_shapes(self) -> None:
        """Raise ProtocolError unless the columns agree with one another as the class docstring says."""
        check_columns(
            self.obs, self.actions, self.rewards, self.terminated, self.truncated, self.final_obs, self.extras
        )
        check_stack(self.obs, self.obs_stack, self.obs_history, self.obs_stacks)
        check_core_state(self.core_state, self.num_envs)

    def to_frames(self) -> list[framing.Frame]:
        self.check_shapes()
        for name, check in HEADER_FIELDS.items():
            check(name, getattr(self, name))
        return framing.encode(self.KIND, *wire_message(self))

    @classmethod
    def from_frames(cls, frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> TransitionBatch:
        header, views = framing.decode_header(frames, limits)
        framing.expect_kind(header, cls.KIND)
        fields = framing.take_fields(header, HEADER_FIELDS)
        stack = framing.count("obs_stack", header.get("obs_stack", 1))
        key_stacks = framing.string_map(KEY_STACKS, header.get(KEY_STACKS, {}))
        games = games_field(header.get(GAMES, []))
        arrays = framing.take_arrays(header, views, limits)
        history = arrays.pop(STACK_HISTORY, None)
        prefix = f"{STACK_HISTORY}."
        key_history = {n[len(prefix) :]: arrays.pop(n) for n in [n for n in arrays if n.startswith(prefix)]}
        if key_history:
            if history is not None:
                raise ProtocolError(f"a batch carries either {STACK_HISTORY!r} or {prefix}KEY arrays", STACK_HISTORY)
            history = key_history
        core_state = arrays.pop(CORE_STATE, None)
        take_keyed(arrays)
        if ragged.RAGGED in header:  # entity keys came as their rows present (2.1.7): padded back to their bounds
            ragged.take_ragged(header[ragged.RAGGED], arrays)
        if keyed.is_keyed(arrays.get("obs")) and keyed.is_keyed(arrays.get("final_obs")):
            ragged.check_counts(arrays["obs"], "obs", 2)  # every entity key's counts, ragged or not (2.1.7)
            ragged.check_counts(arrays["final_obs"], "final_obs", 1)
        for name in CORE_ARRAYS:
            if name not in arrays:
                raise ProtocolError("required array is missing", name)
        extras = {}
        for name, arr in arrays.items():
            if name in CORE_ARRAYS:
                continue
            if not name.startswith("extra.") or len(name) == len("extra."):
                raise ProtocolError(f"unknown array {name!r}; extra arrays are named 'extra.<name>'", "arrays")
            extras[name[len("extra.") :]] = arr
        batch = cls(
            **fields,
            **{n: arrays[n] for n in CORE_ARRAYS},
            extras=extras,
            obs_stack=stack,
            obs_history=history,
            obs_stacks=key_stacks,
            core_state=core_state,
            games=games,
        )
        batch.check_shapes()
        return batch


def wire_message(batch: TransitionBatch) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
    """The header fields and named arrays `batch` travels as, unchecked (to_frames checks them first)."""
    fields = {name: getattr(batch, name) for name in HEADER_FIELDS}
    bounds = ragged.ragged_keys(batch.obs)
    if bounds:  # only entity observations carry the field; every other batch stays exactly as before
        fields[ragged.RAGGED] = bounds
    arrays = wire_arrays(batch, bounds)
    if batch.obs_stack > 1:  # unstacked batches stay exactly as before: no new key, no new array
        fields["obs_stack"] = batch.obs_stack
        arrays.append((STACK_HISTORY, batch.obs_history))
    if batch.obs_stacks:  # a Dict observation's stacked keys (2.1.5): one history array per key
        fields[KEY_STACKS] = dict(batch.obs_stacks)
        arrays += [(f"{STACK_HISTORY}.{key}", arr) for key, arr in batch.obs_history.items()]
    if batch.core_state is not None:  # a feed-forward policy's batches stay exactly as before
        arrays.append((CORE_STATE, batch.core_state))
    if batch.games:  # only a self-play learning policy's batches carry games
        fields[GAMES] = [list(game) for game in batch.games]
    arrays += [(f"extra.{name}", arr) for name, arr in batch.extras.items()]
    return fields, arrays


def wire_arrays(batch: TransitionBatch, bounds: dict[str, int]) -> list[tuple[str, np.ndarray]]:
    """The core arrays as they travel: keyed observations as one `obs.KEY` and `final_obs.KEY` per key, the
    entity keys in `bounds` as their rows present only (PROTOCOL.md 2.1.7)."""
    out = []
    for name in CORE_ARRAYS:
        value = getattr(batch, name)
        if name in KEYED_ARRAYS and keyed.is_keyed(value):
            value = ragged.pack_keyed(value, bounds, 2 if name == "obs" else 1) if bounds else value
            out += [(f"{name}.{key}", arr) for key, arr in value.items()]
        else:
            out.append((name, value))
    return out


def take_keyed(arrays: dict[str, np.ndarray]) -> None:
    """Gather `obs.KEY` and `final_obs.KEY` arrays into dicts under `obs` and `final_obs` (in place); a batch
    must not mix them with a plain `obs`, and both must name the same keys."""
    for name in KEYED_ARRAYS:
        prefix = f"{name}."
        found = {n[len(prefix) :]: arrays.pop(n) for n in [n for n in arrays if n.startswith(prefix)]}
        if not found:
            continue
        if name in arrays:
            raise ProtocolError(f"a batch carries either {name!r} or {prefix}KEY arrays, not both", name)
        if len(found) > keyed.MAX_KEYS or "" in found:
            raise ProtocolError(f"1 to {keyed.MAX_KEYS} non-empty keys, got {sorted(found)}", name)
        arrays[name] = found
    obs, final = arrays.get("obs"), arrays.get("final_obs")
    if keyed.is_keyed(obs) != keyed.is_keyed(final) or (keyed.is_keyed(obs) and list(obs) != list(final)):
        raise ProtocolError("must have exactly the keys of obs (one final_obs.KEY per obs.KEY)", "final_obs")


def check_columns(obs, actions, rewards, terminated, truncated, final_obs, extras) -> None:
    """Consistency of an unroll's columns; names the first offending array."""
    if actions.ndim < 2:
        raise ProtocolError(f"must be [T, K, ...], got shape {list(actions.shape)}", "actions")
    steps, envs = actions.shape[:2]
    is_keyed = keyed.is_keyed(obs)
    if not is_keyed and (obs.ndim < 2 or obs.shape[:2] != (steps + 1, envs)):
        raise ProtocolError(f"must be [T+1={steps + 1}, K={envs}, ...], got {list(obs.shape)}", "obs")
    if rewards.shape != (steps, envs) or rewards.dtype.kind != "f":
        raise ProtocolError(
            f"must be float [T={steps}, K={envs}], got {rewards.dtype} {list(rewards.shape)}", "rewards"
        )
    for name, flags in (("terminated", terminated), ("truncated", truncated)):
        if flags.shape != (steps, envs) or flags.dtype != np.bool_:
            raise ProtocolError(f"must be bool [T={steps}, K={envs}], got {flags.dtype} {list(flags.shape)}", name)
    if is_keyed:
        check_keyed(obs, final_obs, steps, envs, truncated)
    else:
        check_final(obs, final_obs, truncated, "final_obs")
    if len(extras) > MAX_EXTRAS:
        raise ProtocolError(f"{len(extras)} extra arrays, at most {MAX_EXTRAS}", "extras")
    for name, arr in extras.items():
        if not isinstance(name, str) or not name:
            raise ProtocolError("extra array names must be non-empty strings", "extras")
        if arr.shape[:2] != (steps, envs):
            raise ProtocolError(f"must start with [T={steps}, K={envs}], got {list(arr.shape)}", f"extra.{name}")


def check_stack(obs, stack, history, key_stacks) -> None:
    """A stacked batch's obs_stack and obs_history agree with its obs (PROTOCOL.md 2.1.2); an unstacked one has none.
    A Dict observation's stacked keys are named in key_stacks instead (2.1.5)."""
    if type(stack) is not int or not 1 <= stack <= MAX_OBS_STACK:
        raise ProtocolError(f"must be an integer in [1, {MAX_OBS_STACK}], got {stack!r}", "obs_stack")
    if keyed.is_keyed(obs):
        if stack > 1:
            raise ProtocolError(f"a Dict observation's stacked keys are named in {KEY_STACKS}", "obs_stack")
        check_key_stacks(obs, history, key_stacks)
        return
    if key_stacks:
        raise ProtocolError("names keys of obs.KEY arrays; this batch's obs is one array", KEY_STACKS)
    if isinstance(history, Mapping):
        raise ProtocolError(f"{STACK_HISTORY}.KEY arrays come only with obs.KEY arrays", STACK_HISTORY)
    if stack == 1:
        if history is not None:
            raise ProtocolError("is only sent with obs_stack > 1", STACK_HISTORY)
        return
    if history is None:
        raise ProtocolError(f"required array is missing (obs_stack is {stack})", STACK_HISTORY)
    expected = (obs.shape[1], stack - 1, *obs.shape[2:])
    if history.shape != expected or history.dtype != obs.dtype:
        raise ProtocolError(
            f"must be {obs.dtype} {list(expected)} ([K, obs_stack-1, *frame]), "
            f"got {history.dtype} {list(history.shape)}",
            STACK_HISTORY,
        )


def check_key_stacks(obs, history, key_stacks) -> None:
    """Each key in key_stacks is a key of obs with S in [2, MAX_OBS_STACK] and its obs_history.KEY of shape
    [K, S-1, *frame] and the key's dtype; no other obs_history arrays (PROTOCOL.md 2.1.5)."""
    if not key_stacks:
        if history is not None:
            raise ProtocolError(f"is only sent for a key named in {KEY_STACKS}", STACK_HISTORY)
        return
    if not isinstance(key_stacks, Mapping) or len(key_stacks) > keyed.MAX_KEYS:
        raise ProtocolError(f"must map at most {keyed.MAX_KEYS} keys of obs to frames per observation", KEY_STACKS)
    history = history if isinstance(history, Mapping) else {}
    for key, stack in key_stacks.items():
        if key not in obs:
            raise ProtocolError(f"names {key!r}, which is not a key of obs ({', '.join(obs)})", KEY_STACKS)
        if type(stack) is not int or not 2 <= stack <= MAX_OBS_STACK:
            raise ProtocolError(f"must be an integer in [2, {MAX_OBS_STACK}], got {stack!r}", f"{KEY_STACKS}.{key}")
        arr = history.get(key)
        if arr is None:
            raise ProtocolError(f"required array is missing ({KEY_STACKS} names {key!r})", f"{STACK_HISTORY}.{key}")
        frames = obs[key]
        expected = (frames.shape[1], stack - 1, *frames.shape[2:])
        if arr.shape != expected or arr.dtype != frames.dtype:
            raise ProtocolError(
                f"must be {frames.dtype} {list(expected)} ([K, S-1, *frame]), got {arr.dtype} {list(arr.shape)}",
                f"{STACK_HISTORY}.{key}",
            )
    extra = [key for key in history if key not in key_stacks]
    if extra:
        raise ProtocolError(f"is only sent for a key named in {KEY_STACKS}", f"{STACK_HISTORY}.{extra[0]}")


def games_field(value: Any) -> tuple[tuple, ...]:
    """`games`: at most MAX_GAMES entries [opponent version >= -1, score 0, 0.5 or 1] or, against another policy's
    version, [version >= 0, score, policy name] (PROTOCOL.md 2.1.6)."""
    if not isinstance(value, list) or len(value) > MAX_GAMES:
        raise ProtocolError(f"must be a list of at most {MAX_GAMES} [version, score] pairs", GAMES)
    games: list[tuple] = []
    for i, game in enumerate(value):
        if not isinstance(game, list) or len(game) not in (2, 3):
            raise ProtocolError(f"entry {i} must be a [version, score] pair or [version, score, policy]", GAMES)
        version, score = game[0], game[1]
        if type(version) is not int or version < -1:
            raise ProtocolError(f"entry {i}: version must be an integer >= -1, got {version!r}", GAMES)
        if type(score) not in (int, float) or score not in SCORES:
            raise ProtocolError(f"entry {i}: score must be 0, 0.5 or 1, got {score!r}", GAMES)
        if len(game) == 2:
            games.append((version, float(score)))
            continue
        policy = game[2]
        if not isinstance(policy, str) or not 0 < len(policy) <= MAX_POLICY_NAME:
            raise ProtocolError(
                f"entry {i}: policy must be a name of 1 to {MAX_POLICY_NAME} characters, got {policy!r}", GAMES
            )
        if version < 0:
            raise ProtocolError(f"entry {i}: another policy's version must be >= 0, got {version}", GAMES)
        games.append((version, float(score), policy))
    return tuple(games)


def check_core_state(state, envs: int) -> None:
    """A recurrent unroll's initial state: float32 [K, S] with 1 <= S <= MAX_CORE_STATE, finite (PROTOCOL.md 2.1.3)."""
    if state is None:
        return
    if state.dtype != np.float32 or state.ndim != 2 or state.shape[0] != envs:
        raise ProtocolError(f"must be float32 [K={envs}, S], got {state.dtype} {list(state.shape)}", CORE_STATE)
    if not 1 <= state.shape[1] <= MAX_CORE_STATE:
        raise ProtocolError(f"S must be in [1, {MAX_CORE_STATE}], got {state.shape[1]}", CORE_STATE)
    if not np.isfinite(state).all():
        raise ProtocolError("holds NaN or infinite values", CORE_STATE)


def check_final(obs: np.ndarray, final_obs: np.ndarray, truncated: np.ndarray, name: str) -> None:
    """One final observation row per truncated step, of obs's shape and dtype."""
    expected_final = (int(np.count_nonzero(truncated)),) + obs.shape[2:]
    if final_obs.shape != expected_final or final_obs.dtype != obs.dtype:
        raise ProtocolError(
            f"must be {obs.dtype} {list(expected_final)} (one row per truncated step), "
            f"got {final_obs.dtype} {list(final_obs.shape)}",
            name,
        )


def check_keyed(obs, final_obs, steps: int, envs: int, truncated) -> None:
    """Each key's obs is [T+1, K, ...] and its final_obs [F, ...] of the same dtype (PROTOCOL.md 2.1.4)."""
    if not keyed.is_keyed(final_obs) or list(final_obs) != list(obs):
        raise ProtocolError("must have exactly the keys of obs (one final_obs.KEY per obs.KEY)", "final_obs")
    if not 1 <= len(obs) <= keyed.MAX_KEYS:
        raise ProtocolError(f"1 to {keyed.MAX_KEYS} keys, got {len(obs)}", "obs")
    for key, arr in obs.items():
        if not isinstance(key, str) or not key or not isinstance(arr, np.ndarray):
            raise ProtocolError("keys must be non-empty strings naming arrays", "obs")
        if arr.ndim < 2 or arr.shape[:2] != (steps + 1, envs):
            raise ProtocolError(f"must be [T+1={steps + 1}, K={envs}, ...], got {list(arr.shape)}", f"obs.{key}")
        check_final(arr, final_obs[key], truncated, f"final_obs.{key}")
