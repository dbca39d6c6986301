"""`tandem bench entities`: an actor's env steps/s on entity observations against the same data as a flat Box,
and the bytes a batch takes on the wire as the entities present vary."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import click
import numpy as np

from tandem.client.bench.options import example_config_option, json_option, quick_option
from tandem.client.bench.report import finish
from tandem.client.bench.vector import steps_per_s
from tandem.client.config_cmd import bench_set_option
from tandem.daemons.algorithms.torch_util import torch_device
from tandem.daemons.config import ConfigError, load_config
from tandem.daemons.envs.gym_envs import EnvBuildError
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol import TransitionBatch

ENV = "tandem.client.bench.entity_envs:swarm"
FORMS = {  # row name -> the overrides that make it
    "entities (attention)": ["model.kind='auto'"],
    "entities (padded MLP)": ["model.kind='mlp'"],
    "flat Box (MLP)": ["model.kind='auto'"],
    "entities, random actions": ["model.kind='auto'"],  # the data's path alone: env, padding, batches; no network
    "flat Box, random actions": ["model.kind='auto'"],
}
# what each form is made of: an override of these would change what a row measures without its name saying so
OWN_KEYS = {
    "env.id": "the bench's own env",
    "env.kwargs": "--entities, --features and --per-entity",
    "env.max_entities": "--entities",
    "model.kind": "each row's own",
    "env.vector": "the built-in loop",
}
FLAT = {"entities (attention)": "flat Box (MLP)", "entities (padded MLP)": "flat Box (MLP)",
        "entities, random actions": "flat Box, random actions"}  # fmt: skip


def form_overrides(name: str, entities: int, features: int, per_entity: bool = False) -> list[str]:
    flat = "true" if name.startswith("flat") else "false"
    each = "true" if per_entity else "false"
    kwargs = f"env.kwargs={{entities={entities}, features={features}, flat={flat}, per_entity={each}}}"
    return [f"env.id='{ENV}'", kwargs, f"env.max_entities={entities}", *FORMS[name]]


def refuse_own_keys(overrides: tuple[str, ...]) -> None:
    """UsageError naming an override of a key the bench sets for its forms (OWN_KEYS) and what sets it instead."""
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        for own, instead in OWN_KEYS.items():
            if key == own or key.startswith(f"{own}."):
                raise click.UsageError(f"--set {key}: the bench sets it for each form ({instead}); leave it out")


def wire_bytes(present: int, bound: int, features: int, steps: int = 32, envs: int = 8) -> float:
    """Bytes per step of an unroll whose every observation holds `present` entities of a type bounded by `bound`."""
    rng = np.random.default_rng(0)
    rows = np.zeros((steps + 1, envs, bound, features), np.float32)
    rows[:, :, :present] = rng.standard_normal((steps + 1, envs, present, features))
    counts = np.full((steps + 1, envs), present, np.int32)
    zero_final = {"thing": np.zeros((0, bound, features), np.float32), "count:thing": np.zeros(0, np.int32)}
    batch = TransitionBatch(
        "default", "bench", 0, 0, 0, steps * envs,
        {"thing": rows, "count:thing": counts},
            np.zeros((steps, envs), np.int64), np.zeros((steps, envs), np.float32),
        np.zeros((steps, envs), bool), np.zeros((steps, envs), bool), zero_final,
    )  # fmt: skip
    return sum(len(memoryview(f)) for f in batch.to_frames()) / (steps * envs)


@click.command("entities")
@example_config_option("entity_skirmish.toml", "The run whose algorithm and entity model settings act.")
@click.option("--entities", default=64, show_default=True, help="Entities a step (and the bound).")
@click.option("--features", default=8, show_default=True, help="Features of each entity.")
@click.option(
    "--per-entity",
    is_flag=True,
    help="Each entity picks a move (a PerEntity head; flat: a MultiDiscrete), not one a step.",
)
@click.option("--seconds", default=8.0, show_default=True, help="Measuring window per form and repeat (--quick: 1).")
@click.option("--repeats", default=3, show_default=True, help="Rounds over every form; medians (--quick: 1).")
@bench_set_option
@json_option
@quick_option("One 1 s window per form")
def entities_cmd(
    config: Path,
    entities: int,
    features: int,
    per_entity: bool,
    seconds: float,
    repeats: int,
    overrides: tuple[str, ...],
    as_json: bool,
    quick: bool,
) -> None:
    """An actor's env steps/s with entity observations against the same data as a flat Box; wire bytes per step.

    The networks act on actors.device (`--set "actors.device='cuda'"` infers on a GPU; the flat Box's MLP then
    leaves its numpy twin too)."""
    if quick:
        seconds, repeats = 1.0, 1
    refuse_own_keys(overrides)
    try:
        cfg = load_config(config, [*form_overrides("flat Box (MLP)", entities, features), *overrides])
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        torch_device(cfg.actors.device)
    except SetupError as exc:
        raise click.UsageError(f"actors.device: {exc}") from None
    set_torch_threads(cfg.actors.torch_threads)
    rates: dict[str, list[float]] = {name: [] for name in FORMS}
    for _ in range(repeats):  # forms interleaved, so a burst of load elsewhere hits them alike
        for name in FORMS:
            form = [*form_overrides(name, entities, features, per_entity), *overrides]
            try:
                rates[name].append(steps_per_s(config, "", form, seconds, name.endswith("random actions")))
            except (SetupError, EnvBuildError) as exc:
                raise click.ClickException(f"{name}: {exc}") from None
    medians = {name: statistics.median(r) for name, r in rates.items()}
    rows = [
        {"form": name, "steps_per_s": round(m, 1), "ratio": round(m / medians[FLAT.get(name, name)], 3)}
        for name, m in medians.items()
    ]
    present = sorted({max(1, entities // 8), entities // 4, entities // 2, entities})
    wire = [{"entities": n, "bytes_per_step": round(wire_bytes(n, entities, features), 1)} for n in present]
    # bytes = fixed + per_entity * n: the fixed part is the step's own (reward, flags, action, log-prob, counts)
    per_one = (wire[-1]["bytes_per_step"] - wire[0]["bytes_per_step"]) / (present[-1] - present[0])
    fixed = wire[0]["bytes_per_step"] - per_one * present[0]
    record = {
        "benchmark": "entities",
        "quick": quick,
        "config": str(config),
        "entities": entities,
        "features": features,
        "num_envs": cfg.env.num_envs,
        "actors_device": cfg.actors.device,
        "overrides": list(overrides),
        "machine": {"cpu_count": os.cpu_count()},
        "rows": rows,
        "per_entity": per_entity,
        "wire": wire,
        "wire_bytes_per_entity": round(per_one, 2),
        "wire_bytes_fixed": round(fixed, 1),
    }
    moves = "a move per entity" if per_entity else "one move a step"
    head = (
        f"{entities} entities of {features} features, {moves}, {cfg.env.num_envs} envs, the policy acting on "
        f"{cfg.actors.device}, {os.cpu_count()} CPUs, medians of {repeats} x {seconds:g} s"
    )
    lines = [
        f"  {row['form']:26} {row['steps_per_s']:>9.0f} env steps/s  x{row['ratio']:.2f} of the flat Box's"
        for row in rows
    ]
    lines += ["  wire bytes per step (observations, actions and the rest of the batch):"]
    lines += [f"    {w['entities']:>5} entities present  {w['bytes_per_step']:>9.1f}" for w in wire]
    lines += [f"    = {fixed:.1f} + {per_one:.2f} per entity ({features} float32 features: {4 * features} bytes)"]
    finish(record, as_json, [head, *lines])
