"""A serial run's directory, as `tandem up` leaves one: locked, its resolved config.toml, the learner's checkpoints."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tandem.daemons.config import RunConfig, render_toml
from tandem.daemons.learner.checkpointer import Checkpointer
from tandem.daemons.learner.disk import LearnerDisk
from tandem.daemons.runtime.names import learner_name
from tandem.daemons.runtime.run_lock import RunDirBusy, lock_run_dir
from tandem.daemons.serial.parts import SerialLearner
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.plugins import IMPORT_PATHS_FILE
from tandem.daemons.settings.setup_errors import SetupError
from tandem.daemons.supervisor.resume import CURVES, move_previous, newest_checkpoints


def earlier_run(directory: Path) -> str | None:
    """What an earlier run left in `directory` (its learners' checkpoints, its curves), in words; None if nothing."""
    found = [f"{policy}'s checkpoints up to version {v}" for policy, (v, _) in newest_checkpoints(directory).items()]
    found += [name for name in CURVES if (directory / name).exists()]
    return ", ".join(found) or None


def open_run_dir(
    config: RunConfig,
    directory: Path,
    fresh: bool,
    plugin_paths: tuple[str, ...] = (),
    announce: Callable[[str], None] | None = None,
) -> IO[str]:
    """Lock `directory`, make room for a new run in it, write config.toml and the import paths; returns the lock.

    A serial run cannot resume (it is deterministic from its seed's first step), and mixing it into an earlier
    run's checkpoints and curves would hand `tandem eval` and `tandem plot` the wrong run: an earlier run is
    moved under previous/ with `fresh`, as `tandem up --fresh` does, and is a SetupError naming it otherwise.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = lock_run_dir(directory)  # the same lock as `tandem up`: never a serial and an async run in one
    except RunDirBusy as exc:
        raise SetupError(str(exc)) from exc
    except OSError as exc:
        raise SetupError(f"cannot write the run directory {directory}: {exc.strerror or exc}") from exc
    try:
        if (left := earlier_run(directory)) is not None:
            if not fresh:
                raise SetupError(
                    f"{directory} holds an earlier run ({left}); a serial run starts from scratch: add --fresh to "
                    "move it under previous/, or choose another run.name or run.dir to keep both"
                )
            moved = move_previous(directory)
            if announce is not None:
                announce(f"starting run {config.run.name!r} fresh; the previous run's checkpoints and curves: {moved}")
        (directory / "config.toml").write_text(render_toml(config))
        # where `tandem eval` and `load_policy` of this run find an env or network module beside the config
        (directory / IMPORT_PATHS_FILE).write_text(json.dumps(list(plugin_paths)))
    except OSError as exc:
        lock.close()
        raise SetupError(f"cannot write the run directory {directory}: {exc.strerror or exc}") from exc
    except BaseException:
        lock.close()
        raise
    return lock


def learner_checkpointer(config: RunConfig, learner: SerialLearner, directory: Path) -> Checkpointer:
    """The learner daemon's checkpointer over the serial learner's training and progress, in learner-default/."""
    disk = LearnerDisk(directory / learner_name(DEFAULT_POLICY), learner.counts)
    learner_cfg = config.learner
    return Checkpointer(
        learner.training,
        learner.progress,
        disk,
        learner_cfg.checkpoint_interval_s,
        every_updates=learner_cfg.checkpoint_every_updates,
    )
