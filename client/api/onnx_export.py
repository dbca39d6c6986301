"""`tandem export --format onnx`: a trained policy as one ONNX file that runs without Python (onnx_graph.py).

DIR/policy.onnx holds the network and, in its metadata (`metadata_props`), what a game needs to feed it:
`tandem.spec` (the JSON of the safetensors export's policy.json: spaces, preprocessing, the run's sections),
`tandem.inputs` and `tandem.outputs` (names, dtypes and shapes), `tandem.initial_state` (a recurrent policy's
state at an episode's start: zeros of its width). The safetensors export is written beside it, so DIR also
loads with `load_exported`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tandem.client.api.export import SPEC_FILE, export_policy
from tandem.client.api.trained import PolicyError, TrainedPolicy
from tandem.daemons.runtime.exit_codes import ExitCode

ONNX_FILE = "policy.onnx"
OPSET = 17


def acting_network(policy: TrainedPolicy) -> Any:
    """The torch module an algorithm's policy acts with; PolicyError for a plug-in's policy that keeps none where
    Tandem looks (`nets.current`)."""
    net = policy.module
    if net is None:
        raise PolicyError(
            f"ONNX export needs the torch network policy {policy.name!r} acts with, and the {policy.algorithm!r} "
            "policy keeps none where Tandem finds the built-in ones' (`nets.current`): export it with "
            "--format safetensors",
            ExitCode.USAGE,
        )
    return net


def graph_of(policy: TrainedPolicy) -> tuple[Any, list[tuple[str, np.ndarray]], list[str]]:
    """(the module to export, its named example inputs [B=2], its output names); PolicyError for what cannot be
    exported yet, named."""
    from tandem.client.api.onnx_graph import ActorCriticGraph, EntityGraph, QGraph, SquashedGraph
    from tandem.daemons.algorithms.models import dummy_obs
    from tandem.daemons.envs.dict_obs import is_dict_space, key_spaces
    from tandem.daemons.envs.entity_actions import is_entity_policy

    spec, net = policy.spec, acting_network(policy)
    obs_space, mask = spec.observation_space, spec.mask_size
    example = dummy_obs(obs_space, 2)
    if example is None:
        raise PolicyError(f"ONNX export cannot make an example of the observation space {obs_space}", ExitCode.USAGE)
    if is_dict_space(obs_space):
        keys = list(key_spaces(obs_space))
        inputs = [(f"obs.{key}", np.ascontiguousarray(example[key])) for key in keys]
    else:
        keys = None
        flat = np.asarray(example).reshape(2, -1)
        inputs = [("obs", flat[:, : flat.shape[1] - mask].astype(np.float32))] if mask else [("obs", example)]
        if mask:
            inputs.append(("action_mask", np.ones((2, mask), np.float32)))
    algorithm = spec.algorithm
    if is_entity_policy(spec.action_space):  # every padded row: the graph's shapes are fixed
        if getattr(net, "recurrent", False):
            raise PolicyError("ONNX export does not take a recurrent entity policy yet", ExitCode.USAGE)
        graph = EntityGraph(net, keys)
        return graph, inputs, ["action", "value", *(f"log_probs.{name}" for name in graph.discrete)]
    if hasattr(net, "head"):  # an actor-critic (APPO, IMPALA, or a plug-in built on it)
        graph = ActorCriticGraph(net, keys, mask, spec.action_space)
        names = ["action", "mean", "log_std"] if graph.kind == "box" else ["action", "log_probs"]
        names.append("value")
        if graph.recurrent:
            inputs.append(("state", np.zeros((2, net.state_size), np.float32)))
            names.append("state_out")
        return graph, inputs, names
    if keys is not None:
        raise PolicyError(f"ONNX export of {algorithm} takes one observation array", ExitCode.USAGE)
    if hasattr(net, "squash"):
        return SquashedGraph(net), inputs, ["action", "mean", "log_std"]
    start = int(getattr(spec.action_space, "start", 0))
    return QGraph(net, mask, start), inputs, ["action", "q_values"]


def export_onnx(policy: TrainedPolicy, out_dir: str | Path) -> Path:
    """Write DIR/policy.onnx (and the safetensors export beside it); returns the ONNX file's path."""
    import onnx
    import torch

    out = Path(out_dir)
    graph, inputs, outputs = graph_of(policy)  # first: a policy ONNX cannot take leaves no files behind
    spec_file = export_policy(policy, out)
    graph.eval()
    net = acting_network(policy)
    trim = getattr(net, "trim", None)
    if trim is not None:
        net.trim = False  # every padded row: no shape may depend on a batch's counts
    examples = tuple(torch.as_tensor(array) for _, array in inputs)
    names = [name for name, _ in inputs]
    dynamic = {name: {0: "batch"} for name in [*names, *outputs]}
    target = out / ONNX_FILE
    tmp = out / f".{ONNX_FILE}.tmp"
    try:
        with torch.no_grad():
            torch.onnx.export(graph, examples, str(tmp), input_names=names, output_names=outputs,
                              dynamic_axes=dynamic, opset_version=OPSET, dynamo=False)  # fmt: skip
    except Exception as exc:  # the exporter's errors are of many kinds; the user needs the gist and the network
        tmp.unlink(missing_ok=True)
        raise PolicyError(f"the network of policy {policy.name!r} did not export to ONNX: {exc}") from exc
    finally:
        if trim is not None:
            net.trim = trim
    model = onnx.load(str(tmp))
    described = {
        "tandem.spec": spec_file.read_text(encoding="utf-8"),
        "tandem.inputs": json.dumps([describe(name, a) for name, a in inputs]),
        "tandem.outputs": json.dumps(outputs),
        "tandem.initial_state": json.dumps([0.0] * int(getattr(acting_network(policy), "state_size", 0))),
    }
    for key, value in described.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(tmp))
    tmp.replace(target)
    return target


def describe(name: str, example: np.ndarray) -> dict[str, Any]:
    return {"name": name, "dtype": example.dtype.str, "shape": ["batch", *example.shape[1:]]}


def onnx_spec(path: str | Path) -> dict[str, Any]:
    """The policy.json an ONNX export carries in its metadata."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    props = {p.key: p.value for p in model.metadata_props}
    if "tandem.spec" not in props:
        raise PolicyError(f"{path} is not a Tandem ONNX export (no tandem.spec in its metadata)")
    return json.loads(props["tandem.spec"])


__all__ = ["ONNX_FILE", "SPEC_FILE", "export_onnx", "onnx_spec"]
