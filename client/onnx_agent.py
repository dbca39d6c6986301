"""A trained policy inside the game's own process: `OnnxAgent("DIR/policy.onnx").act(obs)`, ONNX Runtime only.

No server, no learner, no torch: the game calls `act` each frame and gets the greedy action as its env takes it.
A recurrent policy keeps its state here (one per agent; `reset()` at each episode's start).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class OnnxAgent:
    """One policy file, acting greedily on one observation (or a batch [B, ...]) at a time."""

    def __init__(self, path: str | Path, threads: int = 1):
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ImportError(f"OnnxAgent needs onnxruntime: pip install 'tandem[onnx]' ({exc})") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # a game's frame: one small batch, no thread pool to wake
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        meta = self.session.get_modelmeta().custom_metadata_map
        if "tandem.inputs" not in meta:
            raise ValueError(f"{path} is not a Tandem ONNX export (tandem export --format onnx)")
        self.spec = json.loads(meta["tandem.spec"])
        self.inputs = {i["name"]: i for i in json.loads(meta["tandem.inputs"])}
        self.initial = np.asarray(json.loads(meta["tandem.initial_state"]), np.float32)
        self.state: np.ndarray | None = None
        self.rows = entity_rows(self.spec)  # an entity policy: the env's observation padded here, its action per head

    @property
    def recurrent(self) -> bool:
        return self.initial.size > 0

    def reset(self) -> None:
        """A new episode: a recurrent policy starts again from its initial state."""
        self.state = None

    def act(self, obs: Any, action_mask: Any = None) -> Any:
        """The greedy action for one observation (a dict for a Dict observation; with an `action_mask` where the
        policy takes one), or actions [B, ...] for a batch. An entity policy takes one observation as its env
        makes it (each type's rows as they are) and gives one action per head, as the env takes them."""
        if self.rows is not None:
            padded = self.rows.pad(obs)
            feed, _ = self.feed(padded, None)
            return self.rows.env_action(self.session.run(None, feed)[0][0], padded)
        feed, single = self.feed(obs, action_mask)
        if self.recurrent:
            rows = next(iter(feed.values())).shape[0]
            if self.state is None or len(self.state) != rows:
                self.state = np.tile(self.initial, (rows, 1))
            feed["state"] = self.state
        outputs = self.session.run(None, feed)
        if self.recurrent:
            self.state = outputs[-1]
        action = outputs[0]
        return action[0] if single else action

    def feed(self, obs: Any, action_mask: Any) -> tuple[dict[str, np.ndarray], bool]:
        if isinstance(obs, Mapping):
            feed = {f"obs.{k}": np.asarray(v) for k, v in obs.items() if f"obs.{k}" in self.inputs}
        else:
            feed = {"obs": np.asarray(obs)}
        if "action_mask" in self.inputs:
            if action_mask is None:
                raise ValueError("this policy takes an action mask: act(obs, action_mask=...)")
            feed["action_mask"] = np.asarray(action_mask)
        missing = [name for name in self.inputs if name not in feed and name != "state"]
        if missing:
            raise ValueError(f"the observation lacks {missing[0]!r} (inputs: {', '.join(self.inputs)})")
        out, single = {}, False
        for name, value in feed.items():
            want = self.inputs[name]
            array = np.asarray(value, np.dtype(want["dtype"]))
            one = array.ndim == len(want["shape"]) - 1
            single = single or one
            out[name] = array[None] if one else array
        return out, single


def entity_rows(spec: dict) -> Any:
    """EntityRows for an entity policy's spec (its padded observation space and its heads), else None."""
    if spec.get("action_space", {}).get("type") != "EntityActions":
        return None
    from tandem.client.api.space_json import space_from_json
    from tandem.daemons.envs.entity_rows import EntityRows
    from tandem.daemons.envs.entity_spaces import padded_layout

    obs, act = space_from_json(spec["observation_space"]), space_from_json(spec["action_space"])
    return EntityRows(padded_layout(obs, act))
