"""Builds PettingZoo environments (AEC or parallel) from `env.id`, and tells them apart from gymnasium ones."""

from __future__ import annotations

import importlib
import os
import typing
from typing import Any

from tandem.daemons.envs.gym_envs import EnvBuildError, has_attribute, resolve_callable
from tandem.daemons.settings.schema import EnvSection

MULTI_AGENT_APIS = ("aec", "parallel")


def quiet_pygame() -> None:
    """PettingZoo's classic and MPE modules import pygame; without these it prints to stderr (an 'error:' line
    about XDG_RUNTIME_DIR that the supervisor would take for the daemon's last error)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def pettingzoo_module(env_id: str) -> Any | None:
    """The module `env_id` names when it follows PettingZoo's layout (an `env` or `parallel_env` factory)."""
    if ":" in env_id or "/" in env_id or not env_id.replace(".", "").replace("_", "").isalnum() or "." not in env_id:
        return None
    quiet_pygame()
    try:
        module = importlib.import_module(env_id)
    except ImportError:
        return None
    return module if hasattr(module, "env") or hasattr(module, "parallel_env") else None


def api_of(env: Any) -> str:
    """'aec', 'parallel' or 'gymnasium' for an env object."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(env, AECEnv):
        return "aec"
    if isinstance(env, ParallelEnv):
        return "parallel"
    return "gymnasium"


def env_api(cfg: EnvSection) -> str:
    """Which API `env.id` speaks: `env.api` when set, else found from the id without building an env.

    Nothing is built here: a daemon calls this before it reports a build stage, so a constructor that hangs
    or raises must not run yet. A 'module:callable' counts as PettingZoo when it is an AECEnv or ParallelEnv
    class, or a function annotated to return one; any other callable is taken for a gymnasium factory, and
    `make_env` names `env.api` if it returns a PettingZoo env after all."""
    if cfg.api != "auto":
        return cfg.api
    module = pettingzoo_module(cfg.id)
    if module is not None:
        return "aec" if hasattr(module, "env") else "parallel"
    if ":" in cfg.id and has_attribute(cfg.id):
        return declared_api(resolve_callable(cfg.id))
    return "gymnasium"


def declared_api(factory: Any) -> str:
    """'aec', 'parallel' or 'gymnasium', from what a class is or what a function says it returns."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    made = factory if isinstance(factory, type) else return_type(factory)
    if isinstance(made, type) and issubclass(made, AECEnv):
        return "aec"
    if isinstance(made, type) and issubclass(made, ParallelEnv):
        return "parallel"
    return "gymnasium"


def return_type(function: Any) -> Any:
    """The return annotation of `function`, resolved; None when it has none or it cannot be resolved."""
    try:
        return typing.get_type_hints(function).get("return")
    except Exception:  # annotations naming what cannot be imported: treat as unannotated
        return None


def build(env_id: str, kwargs: dict[str, Any]) -> Any:
    quiet_pygame()
    try:
        return resolve_callable(env_id)(**kwargs)
    except EnvBuildError:
        raise
    except Exception as exc:  # a user's env may raise anything while being built
        raise EnvBuildError(f"building env {env_id!r} failed: {type(exc).__name__}: {exc}") from exc


def make_world(cfg: EnvSection, api: str) -> Any:
    """One PettingZoo env of `api` ('aec' or 'parallel'), from a PettingZoo module path or 'module:callable'."""
    if api not in MULTI_AGENT_APIS:
        raise EnvBuildError(f"env.api {api!r} is not a multi-agent API ({', '.join(MULTI_AGENT_APIS)})")
    module = pettingzoo_module(cfg.id)
    if module is not None:
        factory = "env" if api == "aec" else "parallel_env"
        if not hasattr(module, factory):
            raise EnvBuildError(f"env.id {cfg.id!r} has no {factory}() for env.api = {api!r}")
        try:
            world = getattr(module, factory)(**cfg.kwargs)
        except Exception as exc:  # a user's env may raise anything while being built
            raise EnvBuildError(f"building env {cfg.id!r} failed: {type(exc).__name__}: {exc}") from exc
    elif ":" in cfg.id:
        world = build(cfg.id, cfg.kwargs)
    else:
        raise EnvBuildError(
            f"env.id {cfg.id!r} is neither a PettingZoo module (with env() or parallel_env()) nor 'module:callable'"
        )
    if api_of(world) != api:
        got = api_of(world)
        world.close()
        raise EnvBuildError(f"env.id {cfg.id!r} built a {got} env, but env.api is {api!r}")
    return world
