"""What every daemon sets up and tears down the same way: its context, control channel, reporter and stop path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tandem.daemons.runtime.control_channel import ControlChannel
from tandem.daemons.runtime.endpoints import LearnerEndpoints, find_learner, socket_options
from tandem.daemons.runtime.reporter import Reporter
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.start_token import wait_start_token
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import sockets

log = logging.getLogger(__name__)
Step = Callable[[], Any]


class DaemonRuntime:
    """A daemon's ZeroMQ context, its control channel to the supervisor (None without one) and its reporter.

    A daemon makes one, gives it what it must close as it makes it, and runs its body through `run`:

        runtime = DaemonRuntime("actor", "actor-0", config, control_endpoint, stop)
        runtime.on_close(links.close)
        return runtime.run(main, last_report=report_now)

    What ends the body (an exception) goes into the last heartbeat. Then the way out runs in this order,
    each step whatever became of the ones before it:

    1. the `on_stop` steps, in the order given (a learner's last checkpoint), still in the daemon's stage;
    2. the stage `stopping` and a last report (`last_report`; by default a heartbeat at once);
    3. the `on_close` steps, newest first (what was made last is closed first; sockets with their linger);
    4. the reporter's farewell: a last heartbeat, carrying the error if any, and the control channel closed;
    5. the context, which closes whatever socket is left without waiting.
    """

    def __init__(self, role: str, name: str, config: RunConfig, control_endpoint: str | None, stop: StopFlag):
        self.name, self.stop = name, stop
        self.ctx = sockets.new_context()
        self.channel = ControlChannel(self.ctx, control_endpoint, socket_options(config)) if control_endpoint else None
        self.reporter = Reporter(role, name, config.supervisor.heartbeat_interval_s, self.channel)
        self.stop_steps: list[Step] = []
        self.closers: list[Step] = []

    # ------------------------------------------------------------------ while running

    def enter_stage(self, stage: str) -> None:
        """Enter `stage` and tell the supervisor at once (env building: each env is a stage with a deadline)."""
        self.reporter.set_stage(stage)
        self.reporter.tick()

    def wait_start_token(self) -> None:
        """Wait for one of the supervisor's start tokens, so that at most N daemons build envs at once."""
        wait_start_token(self.channel, self.name, self.reporter, lambda: bool(self.stop))

    def find_learner(self, config: RunConfig, policy: str, actor: int | None = None) -> LearnerEndpoints:
        """Where `policy`'s learner is (asked of the supervisor, heartbeating while it waits; see find_learner);
        `actor`: this actor's index, which picks the replica it feeds when the policy has several."""
        return find_learner(self.channel, config, policy, self.stop, self.reporter.tick, actor)

    # ------------------------------------------------------------------ the way out

    def on_stop(self, step: Step) -> None:
        """Do `step` on the way out, before the stop stage (it still reports the daemon's own stage)."""
        self.stop_steps.append(step)

    def on_close(self, close: Step) -> None:
        """Call `close` on the way out, after the last report; the newest is closed first."""
        self.closers.append(close)

    def run(self, main: Step, last_report: Step | None = None) -> int:
        """Run `main` until it returns or raises, then go out in order (see the class); returns 0.

        An error on the way out after `main` ended well is raised once everything is closed; after `main`
        raised, it is logged and `main`'s error goes on."""
        ended_well = False
        try:
            main()
            ended_well = True
        except Exception as exc:
            self.reporter.failed(exc)
            raise
        finally:
            problems = self.close(last_report or self.reporter.report_now)
            for problem in problems[1 if ended_well else 0 :]:
                log.error("on the way out: %s", problem, exc_info=problem)
        if problems:
            raise problems[0]
        return 0

    def close(self, last_report: Step) -> list[Exception]:
        """Every step of the way out, each in turn whatever the others did; the errors they raised."""
        problems: list[Exception] = []

        def attempt(step: Step) -> None:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the rest must still be closed; the caller reports it
                problems.append(exc)

        for step in self.stop_steps:
            attempt(step)
        attempt(lambda: self.reporter.set_stage("stopping"))
        attempt(last_report)
        for close in reversed(self.closers):
            attempt(close)
        attempt(self.reporter.close)
        attempt(lambda: sockets.close_context(self.ctx, linger_ms=0))
        return problems
