"""A daemon's helper thread: started once, its death seen by the main loop, stopped within a bound."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 5.0


class WorkerThread:
    """One named daemon thread running `target(*args)` until `stopping`; whatever it raises is kept (and
    `on_error` told), so that the main loop's `check()` fails loudly instead of running on without it."""

    def __init__(
        self, name: str, died: type[Exception] = RuntimeError, on_error: Callable[[BaseException], None] | None = None
    ):
        self.name, self.died, self.on_error = name, died, on_error
        self.thread: threading.Thread | None = None
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    @property
    def started(self) -> bool:
        return self.thread is not None

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    def start(self, target: Callable[..., None], *args: Any) -> None:
        self.thread = threading.Thread(target=self._guarded, args=(target, *args), name=self.name, daemon=True)
        self.thread.start()

    def _guarded(self, target: Callable[..., None], *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - a bug: recorded, and the main loop fails loudly in check()
            self.error = exc
            if self.on_error is not None:
                self.on_error(exc)
            log.exception("%s thread died", self.name)

    def check(self) -> None:
        """Raise `died` if the thread has ended on its own (the main loop calls this)."""
        ended = self.thread is not None and not self.thread.is_alive() and not self.stop_event.is_set()
        if self.error is not None or ended:
            raise self.died(f"the {self.name} thread died: {self.error!r}") from self.error

    def stop(self, timeout_s: float = JOIN_TIMEOUT_S) -> bool:
        """Ask the thread to end and wait at most `timeout_s`; False if it is still running."""
        self.stop_event.set()
        if self.thread is None:
            return True
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            log.warning("%s thread did not stop within %.1f s", self.name, timeout_s)
            return False
        return True
