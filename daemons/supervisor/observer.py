"""Once a second from the supervisor's loop: a metrics.jsonl record (and TensorBoard), and a snapshot for /metrics."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.supervisor.run_metrics import RunMetricsLog
from tandem.daemons.supervisor.status import status_data

if TYPE_CHECKING:  # the supervisor builds these helpers' arguments; they never import it at run time
    from tandem.daemons.settings.schema import RunConfig
    from tandem.daemons.supervisor.supervisor import Supervisor

log = logging.getLogger(__name__)
INTERVAL_S = 1.0


class ObserverError(RuntimeError):
    """The metrics endpoint cannot start (its port is taken); the message names the config key."""


class Observer:
    """Owns the run's curves and the optional HTTP endpoint; reads the supervisor only on the main loop's thread."""

    def __init__(self, config: RunConfig, directory: Path):
        self.server = None
        section = config.supervisor
        if section.metrics_port:
            from tandem.daemons.supervisor.metrics_http import (
                MetricsPortBusy,
                MetricsServer,
            )  # prometheus_client on use only

            try:
                self.server = MetricsServer(section.metrics_host, section.metrics_port)
            except MetricsPortBusy as exc:
                raise ObserverError(str(exc)) from exc
        sink = None
        if config.tracking.wandb:
            from tandem.daemons.config import config_to_dict
            from tandem.daemons.supervisor.wandb_sink import TrackingError, WandbSink  # wandb on use only

            try:
                sink = WandbSink(directory, config.tracking, config.run.name, config_to_dict(config))
            except TrackingError as exc:
                self.close_server()
                raise ObserverError(str(exc)) from exc
        try:
            self.curves = RunMetricsLog(directory, wandb=sink)
        except OSError as exc:
            self.close_server()
            if sink is not None:
                sink.close()
            raise ObserverError(f"cannot write {directory / 'metrics.jsonl'}: {exc.strerror or exc}") from exc
        self.next_due = 0.0
        self.failures = 0  # records the disk refused

    def tick(self, sup: Supervisor, now: float) -> None:
        """Called every loop pass; does its work once per INTERVAL_S."""
        if now < self.next_due:
            return
        self.next_due = now + INTERVAL_S
        self._record(sup, now)

    def _record(self, sup: Supervisor, now: float) -> None:
        figures = sup.view.figures(now)
        try:
            self.curves.write(figures, time.time())
        except (OSError, ValueError) as exc:  # a full disk must not end the run: counted, logged at 1, 2, 4, ...
            self.failures += 1
            why = getattr(exc, "strerror", None) or exc
            sup.faults["metrics"] = f"cannot write the run's curves ({self.curves.path} and its events): {why}"
            log_dropped(log, f"a record of {self.curves.path}", self.failures, exc)
        else:
            if sup.faults.pop("metrics", None) is not None:
                log.info("appending to %s again", self.curves.path)
        if self.server is not None:
            self.server.publish({"status": status_data(sup, now), "figures": figures})

    def close(self, sup: Supervisor, now: float) -> None:
        """The last record (the figures at the end), then the file and the HTTP thread are closed."""
        try:
            self._record(sup, now)
        except Exception:  # noqa: BLE001 (the daemons must still be stopped by the caller)
            log.exception("the last metrics record failed")
        finally:
            self.curves.close()
            self.close_server()

    def close_server(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
