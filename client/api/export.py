"""A pickle-free policy export: safetensors weights and a JSON spec, loaded back with `load_exported(DIR)`.

DIR/policy.json says what network to build (algorithm, spaces, the policy's [model] and [algorithm]
sections) and what the observations must look like (the env and its preprocessing); DIR/weights.safetensors
holds the tensors. Loading runs no code from either file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tandem.client.api.space_json import space_from_json, space_to_json
from tandem.client.api.trained import PolicyError, PolicySpec, TrainedPolicy
from tandem.daemons.config import ConfigError, config_to_dict
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.runtime.exit_codes import ExitCode

SPEC_FILE = "policy.json"
WEIGHTS_FILE = "weights.safetensors"
FORMAT = "tandem-policy"
FORMAT_VERSION = 1
SECTIONS = ("algorithm", "model", "env")  # what rebuilds the network, and the env whose observations it takes


def preprocessing(config: Any) -> dict[str, Any]:
    """In words and keys, what an observation must have gone through before `act` (for users outside Tandem)."""
    if config.env.atari.enabled:
        a = config.env.atari
        return {
            "kind": "atari",
            "describe": (
                f"ALE env with frameskip=1, then gymnasium AtariPreprocessing(noop_max={a.noop_max}, "
                f"frame_skip={a.frame_skip}, screen_size={a.screen_size}, grayscale_obs={a.grayscale}, "
                "scale_obs=False), "
                f"then FrameStackObservation({a.frame_stack}): uint8 frames, unscaled (the network divides by 255)"
            ),
        }
    if config.env.pixels.enabled:
        p = config.env.pixels
        steps = [f"MaxAndSkipObservation(skip={p.frame_skip})"] * (p.frame_skip > 1)
        steps += ["GrayscaleObservation()"] * p.grayscale + [f"ResizeObservation(({p.screen_size}, {p.screen_size}))"]
        steps += ["HxWxC moved to CxHxW"] * (not p.grayscale)
        if p.frame_stack > 1:
            steps.append(
                f"FrameStackObservation({p.frame_stack})" + ", reshaped to [stack*C, H, W]" * (not p.grayscale)
            )
        return {
            "kind": "pixels",
            "describe": (
                f"the env's HxWxC (or HxW) uint8 frames, then gymnasium {', then '.join(steps)}: uint8 frames, "
                "unscaled (the network divides by 255)"
            ),
        }
    return {
        "kind": "none",
        "describe": "the env's observation as it is (a dict with an action mask is flattened "
        "to [observation..., action_mask...] by act)",
    }


def export_policy(policy: TrainedPolicy, out_dir: str | Path) -> Path:
    """Write `policy` into `out_dir` (made if needed): weights.safetensors and policy.json; returns the JSON's path."""
    from safetensors.numpy import save_file

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PolicyError(f"cannot create {out}: {exc.strerror or exc}", ExitCode.USAGE) from exc
    spec = policy.spec
    full = config_to_dict(spec.config)
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "policy": spec.name,
        "algorithm": spec.algorithm,
        "version": spec.version,
        "source": spec.source,
        "observation_space": space_to_json(spec.observation_space),
        "action_space": space_to_json(spec.action_space),
        "mask_size": spec.mask_size,
        "config": {section: full[section] for section in SECTIONS},
        "preprocessing": preprocessing(spec.config),
        "weights": WEIGHTS_FILE,
    }
    text = json.dumps(document, indent=2, default=str)  # default: a TOML date in env.kwargs becomes its text
    weights = {
        name: array if array.flags.c_contiguous else array.copy(order="C") for name, array in policy.weights().items()
    }
    # Temp names, renamed last, so a directory never holds a spec that names weights half written.
    save_file(weights, str(out / f".{WEIGHTS_FILE}.tmp"), metadata={"format": FORMAT})
    (out / f".{SPEC_FILE}.tmp").write_text(text + "\n", encoding="utf-8")
    os.replace(out / f".{WEIGHTS_FILE}.tmp", out / WEIGHTS_FILE)
    os.replace(out / f".{SPEC_FILE}.tmp", out / SPEC_FILE)
    return out / SPEC_FILE


def read_spec(directory: Path) -> dict[str, Any]:
    file = directory / SPEC_FILE
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(f"{directory} is not an exported policy: it has no {SPEC_FILE}", ExitCode.USAGE) from None
    except (OSError, ValueError) as exc:
        raise PolicyError(f"{file} is not readable JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise PolicyError(f"{file} is not a {FORMAT} spec")
    if document.get("format_version") != FORMAT_VERSION:
        raise PolicyError(
            f"{file} has format_version {document.get('format_version')!r}; this Tandem reads {FORMAT_VERSION}"
        )
    return document


def load_exported(
    directory: str | Path, device: str = "cpu", seed: int | None = None, policy: str | None = None
) -> TrainedPolicy:
    """The policy `export_policy` wrote, built from its JSON spec and safetensors weights; no env, no daemon."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    directory = Path(directory)
    document = read_spec(directory)
    if policy is not None and policy != document.get("policy"):
        raise PolicyError(f"{directory} holds policy {document.get('policy')!r}, not {policy!r}", ExitCode.USAGE)
    try:
        config = config_from_dict({section: document["config"][section] for section in SECTIONS})
        spec = PolicySpec(
            str(document["policy"]),
            config,
            space_from_json(document["observation_space"]),
            space_from_json(document["action_space"]),
            int(document["mask_size"]),
            int(document["version"]),
            str(directory),
        )
    except (KeyError, TypeError, ValueError, ConfigError) as exc:
        raise PolicyError(f"{directory / SPEC_FILE} does not describe a policy Tandem can build: {exc}") from exc
    try:
        weights = load_file(str(directory / WEIGHTS_FILE))
    except (OSError, SafetensorError) as exc:
        raise PolicyError(f"cannot read the weights of {directory}: {exc}") from exc
    return TrainedPolicy(spec, weights, device=device, seed=seed)
