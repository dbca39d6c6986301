"""An algorithm's state as bytes without pickle: tensors as safetensors, everything else as JSON in its metadata.

Replica 0 hands its whole training state (weights, optimizer moments, statistics) to the other replicas this
way when a group forms, so a replica needs no access to replica 0's checkpoints. Nothing in it can run code
when read: safetensors holds raw tensors, JSON plain values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

PLAIN_KEY = "tandem.plain"  # the metadata entry with the JSON of every value that is not a tensor
TENSOR_TAG = "__tensor__"  # in that JSON: where a tensor stood (its safetensors name)


def key_of(key: Any) -> str:
    """A mapping key as text that says its type (optimizer states are keyed by int, most others by str)."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise ValueError(f"state keys must be str or int, got {type(key).__name__} {key!r}")
    return f"{'i' if isinstance(key, int) else 's'}:{key}"


def key_from(text: str) -> Any:
    kind, _, name = text.partition(":")
    return int(name) if kind == "i" else name


def pack(state: Mapping[str, Any]) -> bytes:
    """`state` (nested mappings and lists of tensors and plain values) as bytes."""
    tensors: dict[str, torch.Tensor] = {}

    def plain(value: Any, path: str) -> Any:
        if isinstance(value, torch.Tensor):
            tensors[path] = value.detach().cpu().contiguous().clone()
            return {TENSOR_TAG: path}
        if isinstance(value, Mapping):
            return {key_of(k): plain(v, f"{path}/{key_of(k)}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v, f"{path}/{i}") for i, v in enumerate(value)]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise ValueError(f"state value at {path or '/'} is a {type(value).__name__}: only tensors and plain values")

    tree = plain(state, "")
    return save_tensors(tensors, metadata={PLAIN_KEY: json.dumps(tree)})


def unpack(data: bytes) -> dict[str, Any]:
    """The state `pack` made; ValueError when `data` is not such a state."""
    try:
        tensors = load_tensors(data)
        # the metadata sits in the header: 8 bytes of its length (little-endian), then its JSON
        header_len = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8 : 8 + header_len]).get("__metadata__", {})
        tree = json.loads(metadata[PLAIN_KEY])
    except Exception as exc:  # a torn or foreign buffer: safetensors and json raise several types
        raise ValueError(f"not a packed algorithm state ({type(exc).__name__}: {exc})") from exc

    def rebuilt(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {TENSOR_TAG}:
                return tensors[value[TENSOR_TAG]]
            return {key_from(k): rebuilt(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rebuilt(v) for v in value]
        return value

    state = rebuilt(tree)
    if not isinstance(state, dict):
        raise ValueError("not a packed algorithm state (its root is not a mapping)")
    return state
