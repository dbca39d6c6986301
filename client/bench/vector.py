"""`tandem bench vector`: one actor's env steps/s with each `env.vector` mode, measured in one run."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import click
import numpy as np

from tandem.client.bench.options import example_config_option, json_option, quick_option
from tandem.client.bench.report import finish
from tandem.client.config_cmd import bench_set_option
from tandem.daemons.acting.stepping import actor_envs, make_stepping
from tandem.daemons.actor.exploration import actor_epsilons
from tandem.daemons.algorithms import make_policy
from tandem.daemons.config import ConfigError, load_config
from tandem.daemons.envs.gym_envs import EnvBuildError
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.settings.agents import DEFAULT_POLICY


def steps_per_s(config_path: Path, mode: str, overrides: list[str], seconds: float, random_actions: bool) -> float:
    """An actor's stepping and policy network as the actor daemon builds them (no sockets, no learner), acting
    with its exploration (or uniformly at random, no network) for `seconds` after one warm-up unroll; env steps/s."""
    cfg = load_config(config_path, [*overrides, f"env.vector='{mode}'"])
    api, build = actor_envs(cfg, seed=1000)
    stepping = make_stepping(build(lambda stage: None), api, cfg, "bench", seed=1000, incarnation=0)
    try:
        spaces = stepping.spaces[DEFAULT_POLICY]
        net = make_policy(cfg, spaces.observation_space, spaces.action_space, seed=0, mask_size=spaces.mask_size)
        eps = actor_epsilons(cfg.actors.explore.epsilon, cfg.actors.explore.epsilon_alpha, 0, 1, len(stepping))

        def choose(policy, obs, env_index):
            if random_actions:
                return np.array([spaces.action_space.sample() for _ in env_index]), {}
            return net.explore(obs, eps[env_index])

        versions = {DEFAULT_POLICY: 0}
        while not stepping.outbox:  # warm-up: first inferences, first batch
            stepping.tick(choose, versions)
        start_steps, start = stepping.env_steps, time.monotonic()
        while time.monotonic() - start < seconds:
            stepping.tick(choose, versions)
            stepping.outbox.clear()
        return (stepping.env_steps - start_steps) / (time.monotonic() - start)
    finally:
        stepping.close()


@click.command("vector")
@example_config_option("cartpole.toml", "The run whose env and model are stepped.")
@click.option(
    "--modes",
    default=",sync,async",
    show_default=True,
    help="env.vector modes, comma-separated ('' is the built-in loop; add 'envpool' where installed).",
)
@click.option("--seconds", default=8.0, show_default=True, help="Measuring window per mode and repeat (--quick: 1).")
@click.option(
    "--repeats", default=3, show_default=True, help="Rounds over every mode; medians are reported (--quick: 1)."
)
@bench_set_option
@click.option("--random-actions", is_flag=True, help="Act at random without the network: the envs' share alone.")
@json_option
@quick_option("One 1 s window per mode")
def vector_cmd(
    config: Path,
    modes: str,
    seconds: float,
    repeats: int,
    overrides: tuple[str, ...],
    random_actions: bool,
    as_json: bool,
    quick: bool,
) -> None:
    """One actor's env steps/s (stepping + batched inference) with each env.vector mode, and each over ''."""
    if quick:
        seconds, repeats = 1.0, 1
    names = [m.strip() for m in modes.split(",")]
    try:
        cfg = load_config(config, list(overrides))
        for name in names:
            load_config(config, [*overrides, f"env.vector='{name}'"])
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    set_torch_threads(cfg.actors.torch_threads)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):  # modes interleaved, so a burst of load elsewhere hits them alike
        for name in names:
            try:
                rates[name].append(steps_per_s(config, name, list(overrides), seconds, random_actions))
            except EnvBuildError as exc:
                raise click.ClickException(str(exc)) from None
    rows = [{"vector": name, "steps_per_s": round(statistics.median(r), 1)} for name, r in rates.items()]
    base = rows[0]["steps_per_s"]
    for row in rows:
        row["ratio"] = round(row["steps_per_s"] / base, 3) if base > 0 else 0.0
    record = {
        "benchmark": "vector",
        "quick": quick,
        "config": str(config),
        "env": cfg.env.id,
        "num_envs": cfg.env.num_envs,
        "random_actions": random_actions,
        "machine": {"cpu_count": os.cpu_count()},
        "rows": rows,
    }
    acting = "random actions" if random_actions else "the policy network acting"
    head = (
        f"{cfg.env.id}, {cfg.env.num_envs} envs, {acting}, {os.cpu_count()} CPUs, medians of {repeats} x {seconds:g} s"
    )
    lines = (
        f"  env.vector = {row['vector']!r:10} {row['steps_per_s']:>10.0f} env steps/s  "
        f"x{row['ratio']:.2f} of {names[0]!r}"
        for row in rows
    )
    finish(record, as_json, [head, *lines])
