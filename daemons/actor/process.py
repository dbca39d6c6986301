"""What both kinds of actor process share: their runtime and learner links, and the start that connects them."""

from __future__ import annotations

from typing import Any

from tandem.daemons.actor.links import LearnerLinks
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.settings.schema import RunConfig


class ActorProcess:
    """Actor `index`: a DaemonRuntime named actor-INDEX and links to its policies' learners. `build` makes what it
    acts in (the envs it steps, or the games it serves), `act` acts until stopped, `report` reports."""

    def __init__(self, config: RunConfig, index: int, stop: StopFlag, control_endpoint: str | None):
        self.config, self.index, self.stop = config, index, stop
        self.runtime = DaemonRuntime("actor", f"actor-{index}", config, control_endpoint, stop)
        self.links = LearnerLinks(self.runtime, config, index)
        self.runtime.on_close(self.links.close)

    def run(self) -> int:
        return self.runtime.run(self.main, last_report=lambda: self.report(force=True))

    def main(self) -> None:
        raise NotImplementedError

    def start(self) -> Any:
        """Build what this actor acts in (closed before the links: it stops first), connect the links to its spaces'
        policies and wait for their first weights; what was built, for the caller to keep."""
        set_torch_threads(self.config.actors.torch_threads)
        built = self.build()
        self.runtime.on_close(built.close)
        self.keep(built)  # before the wait: its reports need what was built, or no heartbeat would go meanwhile
        self.links.connect(built.spaces)
        self.links.wait_weights(self.report)
        return built

    def build(self) -> Any:
        raise NotImplementedError

    def keep(self, built: Any) -> None:
        """Hold what `build` made (what `report` reads)."""
        raise NotImplementedError

    def report(self, force: bool = False) -> None:
        raise NotImplementedError
