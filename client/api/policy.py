"""Trained policies for people: `load_policy(run dir, checkpoint or export)`, then `.act(obs)`; no daemon runs.

Nothing here imports torch until a policy is loaded, so `import tandem` stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tandem.client.api.checkpoint_choice import available, pick, refuse_choice
from tandem.client.api.export import SPEC_FILE, load_exported
from tandem.client.api.trained import PolicyError, PolicySpec, TrainedPolicy
from tandem.daemons.config import ConfigError, RunConfig, load_config
from tandem.daemons.config.policies import policy_config
from tandem.daemons.evaluator.kept import LATEST
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.plugins import add_to_path, run_import_paths

CONFIG_FILE = "config.toml"  # the resolved config `tandem up` writes into the run directory
LEARNER_PREFIX = "learner-"


def load_policy(
    source: str | Path,
    policy: str | None = None,
    device: str = "cpu",
    seed: int | None = None,
    checkpoint: str | None = None,
) -> TrainedPolicy:
    """Policy `policy` (default 'default') of a run directory, of a checkpoint file
    (runs/NAME/learner-POLICY/ckpt-*.pt, the run's config.toml two levels up), or of an exported directory.

    From a run directory, `checkpoint` picks which: 'latest' (the default: the newest ckpt-*.pt), 'best'
    (the evaluator's best-evaluated weights, best.pt) or 'solved' (the first that met stop.eval_return).
    Builds one env of the run to learn the policy's spaces (an export needs none). PolicyError naming
    what is missing or wrong otherwise.
    """
    path = Path(source)
    if path.is_dir() and (path / SPEC_FILE).is_file():
        refuse_choice(checkpoint, path, "an exported policy")
        return load_exported(path, device=device, seed=seed, policy=policy)
    run_dir, name, file = locate(path, policy)
    if file is not None:
        refuse_choice(checkpoint, file, "a checkpoint file")
    config = read_run_config(run_dir)
    try:
        pconf = policy_config(config, name)
    except ConfigError as exc:
        raise PolicyError(f"{run_dir}: {exc}", ExitCode.USAGE) from exc
    state, where = read_checkpoint(file or pick(run_dir / f"{LEARNER_PREFIX}{name}", checkpoint))
    spaces = probe_spaces(config, name, run_dir)
    evaluation = state.get("evaluation")  # what the evaluator measured, in the files it keeps
    spec = PolicySpec(
        name,
        pconf,
        spaces.observation_space,
        spaces.action_space,
        spaces.mask_size,
        int(state.get("version", -1)),
        str(where),
        evaluation if isinstance(evaluation, dict) else None,
    )
    return TrainedPolicy(spec, acting_weights(state, pconf.algorithm.name, where), device=device, seed=seed)


def locate(path: Path, policy: str | None) -> tuple[Path, str, Path | None]:
    """(run directory, policy name, checkpoint file or None for the newest) of what the user named."""
    if not path.exists():
        raise PolicyError(
            f"{path} does not exist: name a run directory (runs/NAME), a checkpoint file "
            "(runs/NAME/learner-POLICY/ckpt-*.pt) or an exported policy",
            ExitCode.USAGE,
        )
    if path.is_file():
        owner = path.parent.name
        name = owner[len(LEARNER_PREFIX) :] if owner.startswith(LEARNER_PREFIX) else policy or DEFAULT_POLICY
        if policy is not None and policy != name:
            raise PolicyError(f"{path} is a checkpoint of policy {name!r}, not {policy!r}", ExitCode.USAGE)
        return path.parent.parent, name, path
    if path.name.startswith(LEARNER_PREFIX) and not (path / CONFIG_FILE).exists():
        name = path.name[len(LEARNER_PREFIX) :]
        if policy is not None and policy != name:
            raise PolicyError(f"{path} holds policy {name!r}'s checkpoints, not {policy!r}'s", ExitCode.USAGE)
        return path.parent, name, None
    return path, policy or DEFAULT_POLICY, None


def read_run_config(run_dir: Path) -> RunConfig:
    file = run_dir / CONFIG_FILE
    if not file.is_file():
        raise PolicyError(
            f"{run_dir} is not a run directory: it has no {CONFIG_FILE} (tandem up writes one into "
            "runs/NAME/; a checkpoint is read with the config two directories above it)",
            ExitCode.USAGE,
        )
    add_to_path(run_import_paths(run_dir))  # an env or network module beside the config the run was started from
    try:
        return load_config(file)
    except ConfigError as exc:
        raise PolicyError(f"{file}: {exc}", ExitCode.CONFIG) from exc


def read_checkpoint(where: Path) -> tuple[dict, Path]:
    """(state, file) of a checkpoint file, or of the newest loadable checkpoint in a policy's directory."""
    import torch

    from tandem.daemons.checkpoints.files import checkpoint_files, load_latest_checkpoint

    if where.is_file():
        try:
            state = torch.load(where, map_location="cpu", weights_only=True)  # runs no code from the file
        except Exception as exc:  # torn, corrupt or not a checkpoint at all: zip, pickle and torch raise many types
            raise PolicyError(f"{where} is not a readable checkpoint ({type(exc).__name__}: {exc})") from exc
        if not isinstance(state, dict):
            raise PolicyError(f"{where} holds a {type(state).__name__}, not a checkpoint")
        return state, where
    files = checkpoint_files(where)
    state = load_latest_checkpoint(where) if files else None
    if state is None:
        others = sorted(p.name for p in where.parent.glob(f"{LEARNER_PREFIX}*") if p.is_dir())
        detail = f" (policy directories here: {', '.join(others)})" if others and not where.is_dir() else ""
        kept = [name for name in available(where) if name != LATEST]  # a remote learner's run dir holds only these
        detail += f" (the evaluator kept: {', '.join(kept)}; pick one with --checkpoint)" if kept else ""
        raise PolicyError(
            f"no readable checkpoint in {where}{detail}; learners write one every "
            "learner.checkpoint_interval_s and when stopped"
        )
    version = int(state.get("version", -1))
    newest = next((p for v, p in reversed(files) if v == version), where)
    return state, newest


def acting_weights(state: Mapping[str, Any], algorithm: str, where: Path) -> dict[str, np.ndarray]:
    """The network the actors run, from a learner checkpoint, as the numpy arrays its learner would publish."""
    import torch

    from tandem.daemons.evaluator.kept import acting_network

    saved = state.get("algorithm")
    saved_name = saved.get("algorithm") if isinstance(saved, Mapping) else None
    if saved_name is None and isinstance(saved, Mapping):
        raise PolicyError(
            f"{where} names no algorithm: the learner's state_dict() must record config.algorithm.name under "
            f"'algorithm' (docs/guides/extending.md), so that a policy is never loaded into the wrong network"
        )
    if saved_name != algorithm:
        raise PolicyError(
            f"{where} holds a checkpoint of algorithm {saved_name!r}, but the run's config says {algorithm!r}"
        )
    part = acting_network(algorithm)
    tensors = saved.get(part) if part else None
    if not isinstance(tensors, Mapping):
        raise PolicyError(f"{where}: no acting network {part!r} in the {algorithm} checkpoint")
    return {
        name: t.detach().to("cpu", dtype=torch.float32 if t.is_floating_point() else t.dtype).numpy()
        for name, t in tensors.items()
    }


def probe_spaces(config: RunConfig, name: str, run_dir: Path) -> Any:
    from tandem.daemons.envs.gym_envs import EnvBuildError
    from tandem.daemons.envs.probe import probe_policy_spaces

    try:
        return probe_policy_spaces(config, name)
    except (EnvBuildError, ValueError, ConfigError) as exc:
        raise PolicyError(
            f"{run_dir}: cannot build the run's env {config.env.id!r} to learn policy {name!r}'s spaces: {exc}"
        ) from exc
