"""Reads a run's TOML (plus `--set` overrides) into `RunConfig`, naming every bad key, type or value."""

from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Any

from tandem.daemons.algorithms.registry import built_in, find_algorithm
from tandem.daemons.config.algorithm import build_algorithm, fill_algorithm_defaults, look_beside, spec_of
from tandem.daemons.config.policies import check_policies, policy_config
from tandem.daemons.config.selfplay import check_selfplay
from tandem.daemons.settings.agents import policy_names, port_table
from tandem.daemons.settings.fields import ConfigError, build, raise_all
from tandem.daemons.settings.file_order import FileOrder
from tandem.daemons.settings.plugins import plugin_folders
from tandem.daemons.settings.schema import RunConfig


def load_config(path: str | Path, overrides: typing.Sequence[str] = ()) -> RunConfig:
    """Parse the TOML file at `path`, apply `section.key=value` overrides, validate everything; every problem
    found is raised at once (ConfigErrors for several), in the order of the file."""
    config, problems, _ = read_config(path, overrides)
    raise_all(problems)
    return config


def read_config(
    path: str | Path, overrides: typing.Sequence[str] = ()
) -> tuple[RunConfig, list[ConfigError], FileOrder]:
    """The config at `path` with defaults in place of what is wrong, every problem in file order, and the
    file's key order (to place more problems found later); ConfigError for a file that cannot be read at all."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{path} is not valid TOML: {exc}") from exc
    data = apply_overrides(data, overrides)
    order = FileOrder(data)
    config, problems = checked_config(data, plugin_folders(path))
    return config, order.sorted(problems), order


def config_from_dict(data: dict[str, Any], plugin_folders: typing.Sequence[str] = ()) -> RunConfig:
    """`data` as a validated RunConfig; a plug-in algorithm it names is also looked for in `plugin_folders`."""
    order = FileOrder(data)
    config, problems = checked_config(data, plugin_folders)
    raise_all(order.sorted(problems))
    return config


def checked_config(data: dict[str, Any], plugin_folders: typing.Sequence[str] = ()) -> tuple[RunConfig, list]:
    """`data` as a RunConfig with defaults in place of what is wrong, and every problem found in it."""
    problems: list[ConfigError] = []
    look_beside(data, plugin_folders)
    try:
        spec = spec_of(data.get("algorithm", {}), "algorithm")  # its section class reads [algorithm]
    except ConfigError as exc:
        problems.append(exc)
        data = {name: value for name, value in data.items() if name != "algorithm"}  # no class to read it with
    else:
        data = fill_algorithm_defaults(data, spec)
        if "algorithm" in data:
            data = {**data, "algorithm": build_algorithm(spec, data["algorithm"], "algorithm", problems)}
    config = build(RunConfig, data, "", problems)
    # Relations need the algorithm and the policies as written; elsewhere a default stands in for a bad value,
    # and a relation that names a bad key is left out (its default would make up a problem the file has not).
    if not any(p.key in ("algorithm", "algorithm.name") or p.key.startswith("policies") for p in problems):
        bad = [p.key for p in problems if p.key]
        problems += [p for p in relation_problems(config) if not any(key in str(p) for key in bad)]
    return config, problems


def parse_override(text: str) -> tuple[list[str], Any]:
    """'section.key=value' -> (['section', 'key'], value); the value is read as TOML, else as a plain string."""
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise ConfigError(key.strip(), f"override {text!r} must look like section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # so that --set env.id=CartPole-v1 needs no quotes
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: typing.Sequence[str]) -> dict[str, Any]:
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(".".join(parts[: i + 1]), "is a value, not a section")
            node = child
        node[parts[-1]] = value
    return data


def check_relations(config: RunConfig) -> None:
    """Values that are each fine alone but impossible together; all of them raised at once."""
    raise_all(relation_problems(config))


def relation_problems(config: RunConfig) -> list[ConfigError]:
    """Every problem of values that are each fine alone but impossible together (each check on its own)."""
    checks: list[typing.Callable[[], None]] = [lambda: check_policies(config)]
    for policy in policy_names(config):
        where = f"policies.{policy}." if config.policies else ""
        checks.append(lambda policy=policy, where=where: check_policy(config, policy, where))
    checks += [
        lambda: check_selfplay(config),
        lambda: check_liveness(config),
        lambda: check_names(config),
        lambda: check_pixels(config),
        lambda: check_fire_reset(config),
        lambda: check_ports(config),
    ]
    problems: list[ConfigError] = []
    for check in checks:
        try:
            check()
        except ConfigError as exc:
            problems += exc.problems
    return problems


def check_policy(config: RunConfig, policy: str, where: str) -> None:
    c = policy_config(config, policy)
    problems: list[ConfigError] = []
    for check in (c.algorithm.check, check_core, check_replicas, check_augment):
        try:
            check(c, where)
        except ConfigError as exc:
            problems += exc.problems
    raise_all(problems)


def check_liveness(config: RunConfig) -> None:
    if config.supervisor.liveness_timeout_s <= config.supervisor.heartbeat_interval_s:
        raise ConfigError("supervisor.liveness_timeout_s", "must be longer than supervisor.heartbeat_interval_s")


def check_names(config: RunConfig) -> None:
    """The model, the env and the run named in a form the daemons can use."""
    problems = []
    if config.model.kind not in ("auto", "mlp", "nature_cnn") and ":" not in config.model.kind:
        problems.append(
            ConfigError("model.kind", f"{config.model.kind!r} is not 'auto', 'mlp', 'nature_cnn' or 'module:callable'")
        )
    if not config.env.id.strip():
        problems.append(ConfigError("env.id", "must name a gymnasium id or 'module:callable'"))
    if not config.run.name or any(c in config.run.name for c in "/\\ "):
        problems.append(ConfigError("run.name", f"{config.run.name!r} must be non-empty, without '/', '\\' or spaces"))
    raise_all(problems)


def check_ports(config: RunConfig) -> None:
    ports = port_table(config)
    chosen = [p for p in ports.values() if p]
    if len(chosen) != len(set(chosen)):
        raise ConfigError("transport", f"two sockets are given the same port: {ports}")


def check_core(config: RunConfig, where: str) -> None:
    """A recurrent core needs an algorithm that trains one."""
    core = config.model.core
    if core == "none":
        return
    if not type(config.algorithm).recurrent_core:
        raise ConfigError(
            f"{where}model.core",
            f"{core!r} needs an algorithm that trains a recurrent core ({', '.join(recurrent_algorithms())}); "
            f"algorithm {config.algorithm.name!r} is feed-forward only: set model.core = 'none'",
        )


def check_replicas(config: RunConfig, where: str) -> None:
    """Data-parallel replicas: started here by the supervisor, each waiting less long than it may stay silent."""
    learner = config.learner
    if learner.replicas == 1:
        return
    if learner.replicas > config.actors.count:
        raise ConfigError(
            f"{where}learner.replicas",
            f"{learner.replicas} replicas for {config.actors.count} actors: each replica trains on its own actors' "
            "data, and the replicas update only together, so every replica needs at least one actor",
        )
    if learner.collective_timeout_s >= config.supervisor.liveness_timeout_s:
        raise ConfigError(
            f"{where}learner.collective_timeout_s",
            f"{learner.collective_timeout_s:g} s must be below supervisor.liveness_timeout_s "
            f"({config.supervisor.liveness_timeout_s:g} s): a replica waiting on a lost one must give up before it "
            "is taken for hung",
        )


def check_augment(config: RunConfig, where: str) -> None:
    """learner.augment copies the unrolls an update takes: only on-policy learners train on unrolls as they came."""
    augment = config.learner.augment
    if not augment:
        return
    if ":" not in augment:
        raise ConfigError(f"{where}learner.augment", f"{augment!r} is not 'module:callable'")
    if not find_algorithm(config.algorithm.name).on_policy:
        on_policy = ", ".join(name for name, spec in built_in().items() if spec.on_policy)
        raise ConfigError(
            f"{where}learner.augment",
            f"algorithm {config.algorithm.name!r} trains on replayed transitions, not on unrolls as they came; "
            f"augment needs an on-policy one ({on_policy})",
        )


def recurrent_algorithms() -> list[str]:
    return [name for name, spec in built_in().items() if spec.section.recurrent_core]


def check_fire_reset(config: RunConfig) -> None:
    """ale-py's vector env presses FIRE only when a game starts, not after a lost life as the others do."""
    env = config.env
    if env.atari.enabled and env.atari.fire_reset and env.vector == "ale":
        raise ConfigError(
            "env.atari.fire_reset",
            "is not available with env.vector = 'ale' (ale-py serves only at a game's start, not after a lost "
            "life): use env.vector = '', 'sync', 'async' or 'envpool', or set fire_reset = false",
        )


def check_pixels(config: RunConfig) -> None:
    """[env.pixels] is one preprocessing among others: not twice, and not where a native vector does its own."""
    env = config.env
    if not env.pixels.enabled:
        return
    if env.atari.enabled:
        raise ConfigError(
            "env.pixels.enabled",
            "cannot be true with env.atari.enabled: both skip, pool, resize and "
            "stack frames (for an ALE id keep [env.atari], for any other image env [env.pixels])",
        )
    if env.vector in ("envpool", "ale"):
        raise ConfigError(
            "env.vector",
            f"{env.vector!r} builds its envs natively, without [env.pixels]' wrappers: "
            "use env.vector = '', 'sync' or 'async'",
        )
