"""`tandem config check`'s probe: build one env and each policy's network, as the daemons will, before a run starts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tandem.daemons.config import RunConfig
from tandem.daemons.config.policies import policy_config, policy_names


class ProbeFailed(Exception):
    """What a daemon of this run would fail on, in one line (the same line the daemon would log)."""


@dataclass
class ProbeReport:
    """What the probe built: one line per policy, and what it left unchecked (and why)."""

    lines: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def probe(config: RunConfig, config_file: str | Path, timeout_s: float) -> ProbeReport:
    """Build what the daemons build, in a thread given at most `timeout_s` (an env constructor may hang);
    ProbeFailed with the daemons' own one-line error for the first mistake found."""
    result: dict[str, object] = {}

    def work() -> None:
        try:
            result["report"] = _probe(config, config_file)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller as one line
            result["error"] = exc

    # A daemon thread: a constructor hung in C cannot be interrupted, and must not keep the CLI from exiting.
    thread = threading.Thread(target=work, name="config-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ProbeFailed(
            f"building env {config.env.id!r} took more than {timeout_s:g} s "
            "(supervisor.build_env_deadline_s): the actors would be killed at that deadline"
        )
    if "error" in result:
        raise ProbeFailed(one_line(result["error"]))  # type: ignore[arg-type]
    return result["report"]  # type: ignore[return-value]


def one_line(exc: BaseException) -> str:
    from tandem.daemons.runtime.reporter import describe_error

    return describe_error(exc)


def _probe(config: RunConfig, config_file: str | Path) -> ProbeReport:
    from tandem.daemons.algorithms import make_policy
    from tandem.daemons.algorithms.torch_util import torch_device
    from tandem.daemons.envs.probe import probe_policy_spaces
    from tandem.daemons.runtime.plugins import add_to_path, plugin_folders
    from tandem.daemons.runtime.setup_errors import SetupError

    add_to_path(plugin_folders(config_file))  # where `tandem up` lets the daemons look for the user's modules
    report = ProbeReport()
    if config.actors.mode == "serve":
        report.skipped.append("envs and networks: actors.mode = 'serve' learns its spaces from the games")
        return report
    for policy in policy_names(config):
        pconf = policy_config(config, policy)
        spaces = probe_policy_spaces(config, policy)
        make_policy(pconf, spaces.observation_space, spaces.action_space, seed=0, mask_size=spaces.mask_size)
        if pconf.learner.remote:
            report.skipped.append(f"learner.device of policy {policy!r}: its learner runs elsewhere")
        else:
            try:
                torch_device(pconf.learner.device)
            except SetupError as exc:
                raise SetupError(
                    f"learner.device: {exc} (--no-probe checks a config meant for another machine without it)"
                ) from exc
        report.lines.append(
            f"policy {policy!r}: obs {brief(spaces.observation_space)}, "
            f"actions {brief(spaces.action_space)}; "
            f"{pconf.algorithm.name} on actors {pconf.actors.device}, learner {pconf.learner.device}"
        )
    return report


def brief(space: object) -> str:
    """A space in a few words: a Box by its shape and dtype, not its every bound."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        return f"Box{tuple(space.shape)} {space.dtype}"
    return str(space)
