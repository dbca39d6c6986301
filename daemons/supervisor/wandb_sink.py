"""The run's curves to Weights & Biases ([tracking] wandb = true): the scalars TensorBoard gets, against env steps.

The supervisor logs them, once a second, as it writes metrics.jsonl: the learners' diagnostics reach it
as `train/NAME` curves, so one W&B run holds the whole run. A resumed Tandem run continues its W&B run
(the id is kept in RUN_DIR/wandb_run_id).
"""

from __future__ import annotations

import logging
import secrets
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tandem.daemons.settings.schema import TrackingSection

log = logging.getLogger(__name__)
RUN_ID_FILE = "wandb_run_id"
FINISH_TIMEOUT_S = 30.0  # an upload still going at the end must not hold the supervisor's exit


class TrackingError(RuntimeError):
    """W&B tracking was asked for and cannot start; the message says what to do."""


class WandbSink:
    """One W&B run for the Tandem run in `directory`; `add` logs a record, `close` finishes within a bound."""

    def __init__(self, directory: Path, tracking: TrackingSection, run_name: str, config: dict[str, object]):
        try:
            import wandb
        except ImportError as exc:
            raise TrackingError(
                "tracking.wandb is set but wandb is not installed: pip install 'tandem[tracking]' "
                "(or set tracking.wandb = false)"
            ) from exc
        if tracking.mode == "online" and not _has_api_key(wandb):
            raise TrackingError(
                "tracking.wandb in online mode needs a W&B API key (`wandb login`, or "
                "WANDB_API_KEY); or set tracking.mode = 'offline' and `wandb sync` later"
            )
        id_file = directory / RUN_ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(6)  # W&B ids: [a-z0-9]
        try:
            self.run = wandb.init(
                project=tracking.project,
                entity=tracking.entity or None,
                name=tracking.run_name or run_name,
                id=run_id,
                resume="allow",
                mode=tracking.mode,
                dir=str(directory),
                config=config,
                settings=wandb.Settings(init_timeout=60, console="off", silent=True),
            )
        except Exception as exc:  # wandb raises its own error types, for a network or an account problem
            raise TrackingError(f"tracking.wandb: W&B did not start a run: {exc}") from exc
        id_file.write_text(run_id + "\n")
        # Every curve against env steps, as in TensorBoard (W&B's own step counts log calls).
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")

    def add(self, step: int, scalars: dict[str, float | int]) -> None:
        self.run.log({"env_steps": step, **scalars})

    def close(self) -> None:
        finisher = threading.Thread(target=self.run.finish, name="wandb-finish", daemon=True)
        finisher.start()
        finisher.join(FINISH_TIMEOUT_S)
        if finisher.is_alive():
            log.warning(
                "W&B did not finish within %.0f s; what it had not uploaded stays in %s (wandb sync)",
                FINISH_TIMEOUT_S,
                self.run.dir,
            )


def _has_api_key(wandb: ModuleType) -> bool:
    try:
        return bool(wandb.api.api_key)
    except Exception:  # noqa: BLE001 - an unreadable netrc is no key
        return False
