"""`tandem config check`'s and `tandem up`'s checks: every mistake of a config, then one env and each policy's
network built as the daemons will build them, before a run starts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tandem.daemons.config import ConfigError, RunConfig
from tandem.daemons.config.policies import policy_config
from tandem.daemons.settings.agents import policy_names
from tandem.daemons.settings.file_order import FileOrder

# Sections the probe reads (with the env build's deadline): a default standing in for a bad value there would
# make the probe build, and blame, what the file does not say.
PROBED = ("env", "model", "algorithm", "policies", "actors", "learner", "selfplay", "supervisor.build_env_deadline_s")


class ProbeFailed(Exception):
    """What daemons of this run would fail on: one line each (the lines the daemons would log)."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("; ".join(lines))


@dataclass
class ProbeReport:
    """What the probe built: one line per policy, and what it left unchecked (and why)."""

    lines: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass
class Findings:
    """A config's check: its mistakes, one line each in the order of the file, and what the probe built (None:
    not probed)."""

    problems: list[str]
    report: ProbeReport | None
    blocked: bool = False  # not probed: a mistake found is in what the env or the networks are built from


def findings(
    config: RunConfig,
    problems: list[ConfigError],
    order: FileOrder,
    run_probe: Callable[[RunConfig], ProbeReport] | None,
) -> Findings:
    """The loader's `problems` (in file order) and, with `run_probe`, what building the run here finds: the run
    directory, then the env and networks unless a mistake already found is in what they are built from."""
    lines = [(order.position(p.key), str(p)) for p in problems]
    report, blocked = None, False
    if run_probe is not None:
        if not any(p.key in ("run", "run.dir", "run.name") for p in problems) and (why := unwritable(config)):
            lines.append((order.position("run.dir"), why))
        blocked = any(p.key == key or p.key.startswith(f"{key}.") for p in problems for key in PROBED)
        if not blocked:
            try:
                report = run_probe(config)
            except ProbeFailed as exc:
                lines += [(order.line_position(line), line) for line in exc.lines]
    lines.sort(key=lambda item: item[0])  # stable: the probe's lines of one key keep their order
    return Findings([line for _, line in lines], report, blocked)


def unwritable(config: RunConfig) -> str | None:
    """run.dir named with why a run could not write there, or None (nothing is created to find out)."""
    from tandem.daemons.runtime.paths import run_dir, unwritable_dir

    directory = run_dir(config)
    why = unwritable_dir(directory)
    if why is None:
        return None
    return (
        f"run.dir {config.run.dir!r}: cannot write the run directory {directory} ({why}): "
        "set run.dir to a folder you can write"
    )


def probe(config: RunConfig, config_file: str | Path, timeout_s: float, margin_s: float = 0.0) -> ProbeReport:
    """Build what the daemons build, in a thread given at most `timeout_s` (an env constructor may hang), and
    `margin_s` more for the rest; ProbeFailed with the daemons' own one-line error for each mistake found."""
    result: dict[str, object] = {}

    def work() -> None:
        try:
            result["report"] = _probe(config, config_file)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller as one line
            result["error"] = exc

    # A daemon thread: a constructor hung in C cannot be interrupted, and must not keep the CLI from exiting.
    thread = threading.Thread(target=work, name="config-probe", daemon=True)
    thread.start()
    thread.join(timeout_s + margin_s)
    if thread.is_alive():
        raise ProbeFailed(
            [
                f"building env {config.env.id!r} took more than {timeout_s:g} s "
                "(supervisor.build_env_deadline_s): the actors would be killed at that deadline"
            ]
        )
    if "error" in result:
        error = result["error"]
        raise error if isinstance(error, ProbeFailed) else ProbeFailed([one_line(error)])  # type: ignore[misc]
    return result["report"]  # type: ignore[return-value]


def one_line(exc: BaseException) -> str:
    from tandem.daemons.runtime.reporter import describe_error

    return describe_error(exc)


def _probe(config: RunConfig, config_file: str | Path) -> ProbeReport:
    from tandem.daemons.settings.plugins import add_to_path, plugin_folders

    add_to_path(plugin_folders(config_file))  # where `tandem up` lets the daemons look for the user's modules
    report = ProbeReport()
    if config.actors.mode == "serve":
        report.skipped.append("envs and networks: actors.mode = 'serve' learns its spaces from the games")
        return report
    failures: list[str] = []
    for policy in policy_names(config):
        try:
            report.lines.append(probe_policy(config, policy, report))
        except Exception as exc:  # noqa: BLE001 - each policy's mistake, one line each
            failures.append(one_line(exc))
    if failures:
        raise ProbeFailed(list(dict.fromkeys(failures)))  # policies of one env share its mistake: said once
    return report


def probe_policy(config: RunConfig, policy: str, report: ProbeReport) -> str:
    """Build `policy`'s spaces, network and device as its actors and learner will; its line of the report."""
    from tandem.daemons.algorithms import make_policy
    from tandem.daemons.algorithms.torch_util import torch_device
    from tandem.daemons.envs.probe import probe_policy_spaces
    from tandem.daemons.settings.setup_errors import SetupError

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
    return (
        f"policy {policy!r}: obs {brief(spaces.observation_space)}, actions {brief(spaces.action_space)}; "
        f"{pconf.algorithm.name} on actors {pconf.actors.device}, learner {pconf.learner.device}"
    )


def brief(space: object) -> str:
    """A space in a few words: a Box by its shape and dtype, not its every bound."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        return f"Box{tuple(space.shape)} {space.dtype}"
    return str(space)
