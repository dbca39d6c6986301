"""The supervisor process's main loop: bind the control socket, start the daemons, keep them alive, stop cleanly.

`tandem up` and `tandem supervise` call `supervise()`; what they show on screen is theirs (the `show`
callback gets the progress figures), what keeps the run alive is here.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tandem.daemons.config import RunConfig, render_toml
from tandem.daemons.runtime.endpoints import is_loopback, socket_options
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.runtime.run_lock import RunDirBusy, lock_run_dir
from tandem.daemons.runtime.sd_notify import shared
from tandem.daemons.runtime.serve_address import serve_endpoint
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.security.curve import check_keys, curve_keys, gatekeeper_for
from tandem.daemons.security.keystore import KeySetupError
from tandem.daemons.settings.plugins import IMPORT_PATHS_FILE
from tandem.daemons.supervisor.children import start_forkserver
from tandem.daemons.supervisor.observer import Observer, ObserverError
from tandem.daemons.supervisor.ports import fix_ports, free_port, plan_children
from tandem.daemons.supervisor.resume import move_previous, resume_message
from tandem.daemons.supervisor.segments import earlier_starts
from tandem.daemons.supervisor.status import state_summary
from tandem.daemons.supervisor.supervisor import Supervisor
from tandem.protocol import ControlReply, ControlRequest, Heartbeat, ProtocolError, TransportError, decode, sockets
from tandem.protocol.control import reply_address

log = logging.getLogger(__name__)
DISPLAY_INTERVAL_S = 0.5
POLL_MS = 50
NOTIFY_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")  # systemd's, for the supervisor alone


class SupervisorError(RuntimeError):
    """The run could not start; `code` is the exit code to end with."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILURE):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Outcome:
    """How a supervised run ended."""

    code: ExitCode
    reason: str
    run_dir: Path
    figures: dict


def handle_control(router, sup: Supervisor, now: float) -> None:
    """Heartbeats and requests from daemons and the CLI; every request gets a reply, bad messages are dropped."""
    while (frames := sockets.recv_frames(router, 0)) is not None:
        identity, body = bytes(frames[0]), frames[1:]
        try:
            message = decode(body)
        except ProtocolError as exc:
            sup.view.malformed += 1
            log_dropped(log, "a malformed control message", sup.view.malformed, exc)
            kind, request_id = reply_address(body)
            if kind != Heartbeat.KIND:  # a heartbeat's sender expects no reply and would never read one
                sockets.send_message(
                    router, ControlReply(request_id, False, "bad_message", str(exc)), identity=identity
                )
            continue
        if isinstance(message, Heartbeat):
            sup.heartbeat(message, now)
        elif isinstance(message, ControlRequest):
            sockets.send_message(router, sup.handle(message, now), identity=identity)
        else:
            sup.view.malformed += 1
            log_dropped(
                log,
                f"a {message.KIND} message on the control socket",
                sup.view.malformed,
                "it takes control_request and heartbeat",
            )
            sockets.send_message(
                router,
                ControlReply(
                    0,
                    False,
                    "bad_kind",
                    f"the control socket takes control_request and heartbeat messages, not {message.KIND}",
                ),
                identity=identity,
            )


def prepare(config: RunConfig, insecure: bool, no_children: bool) -> RunConfig:
    """The config the daemons will run with: free ports fixed, a bind beyond loopback refused without --insecure."""
    if no_children:  # learners started elsewhere bind what their own config says and register it here
        t = config.transport
        config = replace(config, transport=replace(t, control_port=t.control_port or free_port(t.host)))
    else:
        config = fix_ports(config)
    try:
        check_keys(config)
    except KeySetupError as exc:
        raise SupervisorError(f"security: {exc}", ExitCode.USAGE) from exc
    if not insecure and not is_loopback(f"tcp://{config.transport.host}:0") and curve_keys(config) is None:
        raise SupervisorError(
            f"transport.host {config.transport.host!r} is not loopback: set security.key_dir "
            "(`tandem keys create`) so every link there uses CurveZMQ, or pass --insecure",
            ExitCode.USAGE,
        )
    serve = config.actors.serve.bind
    if config.actors.mode == "serve" and not insecure and not is_loopback(serve.replace(":*", ":0")):
        raise SupervisorError(
            f"actors.serve.bind {serve!r} is not loopback: the game socket has no CurveZMQ yet "
            "(games would need keys too), so binding there needs --insecure",
            ExitCode.USAGE,
        )
    if config.actors.mode == "serve":  # a bind no actor can make is refused now, not by each actor at its start
        for index in range(config.actors.count):
            try:
                serve_endpoint(serve, index, run_dir(config) / "games")
            except ValueError as exc:
                raise SupervisorError(str(exc), ExitCode.USAGE) from exc
    return config


def supervise(
    config: RunConfig,
    honour_stop: bool,
    insecure: bool = False,
    no_children: bool = False,
    show: Callable[[dict, float], None] | None = None,
    fresh: bool = False,
    announce: Callable[[str], None] = log.info,
    plugin_paths: tuple[str, ...] = (),
    preflight: Callable[[], None] | None = None,
) -> Outcome:
    """Start and keep the run's daemons alive until a stop condition, `tandem stop`, a FATAL, or a signal.

    With `no_children` it starts nothing: daemons started elsewhere (systemd units, tmux windows) connect
    with --control, and it hands out start tokens, keeps the learner registry and watches heartbeats.
    `plugin_paths`: folders every child adds to its import path (the user's config folder and working
    directory: the children read the run directory's copy of the config). `preflight` (`tandem up`'s config
    check, which may use the fork server) runs before the run directory is touched; what it raises ends the start.
    """
    notifier = shared()  # made now, before its variables leave the environment
    for key in NOTIFY_ENV:  # as sd_notify(unset_environment=1): children must not speak for this unit
        os.environ.pop(key, None)
    config = prepare(config, insecure, no_children)
    if not no_children:
        start_forkserver()  # its imports overlap the set-up below (after the environment above is clean)
    if preflight is not None:
        preflight()
    directory = run_dir(config)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = lock_run_dir(directory)
    except RunDirBusy as exc:
        raise SupervisorError(str(exc)) from exc
    except OSError as exc:
        raise SupervisorError(f"cannot write the run directory {directory}: {exc.strerror or exc}") from exc
    try:
        announce_resume(config, directory, fresh, announce)
        return _supervise_locked(config, directory, notifier, honour_stop, insecure, no_children, show, plugin_paths)
    finally:
        lock.close()


def announce_resume(config: RunConfig, directory: Path, fresh: bool, announce: Callable[[str], None]) -> None:
    """Say out loud that learners will resume from earlier checkpoints, or move those aside for --fresh."""
    if fresh:
        try:
            moved = move_previous(directory)
        except OSError as exc:
            raise SupervisorError(f"--fresh could not move the previous run aside in {directory}: {exc}") from exc
        if moved is not None:
            announce(
                f"starting run {config.run.name!r} fresh; the previous run's checkpoints and curves are in {moved}"
            )
    elif (message := resume_message(config.run.name, directory)) is not None:
        announce(message)


def _supervise_locked(
    config: RunConfig,
    directory: Path,
    notifier,
    honour_stop: bool,
    insecure: bool,
    no_children: bool,
    show: Callable[[dict, float], None] | None,
    plugin_paths: tuple[str, ...] = (),
) -> Outcome:
    try:
        resolved = directory / "config.toml"
        resolved.write_text(render_toml(config))
        # where the daemons import the user's modules from (the config's folder, the working directory), so that
        # `tandem eval` and `load_policy` of this run find an env or network module beside the original config
        (directory / IMPORT_PATHS_FILE).write_text(json.dumps(list(plugin_paths)))
    except OSError as exc:
        raise SupervisorError(f"cannot write the run directory {directory}: {exc.strerror or exc}") from exc
    started = time.monotonic()
    ctx = sockets.new_context()
    gatekeeper = None
    try:
        control_at = f"tcp://{config.transport.host}:{config.transport.control_port}"
        gatekeeper = gatekeeper_for(ctx, config, [control_at])  # first: with CURVE, ZAP fails closed
        router = sockets.control_router(ctx, control_at, socket_options(config))
    except TransportError as exc:
        if gatekeeper is not None:
            gatekeeper.stop()
        sockets.close_context(ctx, 0)
        raise SupervisorError(str(exc)) from exc
    control = sockets.bound_endpoint(router)
    endpoint_file = directory / "endpoint"
    # whole or absent, never empty: a CLI or game reading it the moment it appears gets the address
    partial = directory / ".endpoint.tmp"
    partial.write_text(control + "\n")
    os.replace(partial, endpoint_file)
    specs = [] if no_children else plan_children(config, insecure)
    sup = Supervisor(
        config,
        resolved,
        control,
        directory / "logs",
        specs,
        adopt=no_children,
        started=started,
        plugin_paths=plugin_paths,
    )
    sup.view.continue_from(earlier_starts(directory / "metrics.jsonl"))  # before the observer appends to it
    try:
        observer = Observer(config, directory)  # metrics.jsonl, TensorBoard, /metrics: before any child starts
    except ObserverError as exc:
        if gatekeeper is not None:
            gatekeeper.stop()
        sockets.close_context(ctx, 0)
        endpoint_file.unlink(missing_ok=True)
        raise SupervisorError(str(exc), ExitCode.CONFIG) from exc
    stop = StopFlag().install()
    code, reason = ExitCode.OK, ""
    ended_unix = None
    try:
        sup.start_all(started)
        notifier.ready(state_summary(sup, started))
        next_display = 0.0
        while True:
            now = time.monotonic()
            handle_control(router, sup, now)
            sup.step(now)
            observer.tick(sup, now)
            if gatekeeper is not None:
                gatekeeper.poll()  # SIGHUP: the allow-list again, without a restart
            if now >= notifier.next_due:  # from this loop only: a hung supervisor stops feeding the watchdog
                notifier.tick(now, state_summary(sup, now))
            if stop:
                code, reason = ExitCode.INTERRUPTED, f"stopped by {stop.signal_name}"
                break
            if sup.stopping:
                code, reason = ExitCode.OK, f"stopped by {sup.stop_requested_by}"
                break
            if (why := sup.fatal_reason()) is not None:
                code, reason = ExitCode.FAILURE, why
                break
            if honour_stop and (why := sup.view.stop_reason(now)) is not None:
                code, reason = ExitCode.OK, why
                ended_unix = time.time()  # when the condition was met; shutting the daemons down comes after
                break
            if show is not None and now >= next_display:
                show(sup.view.figures(now), now)
                next_display = now + DISPLAY_INTERVAL_S
            sockets.poll([router], POLL_MS)
    finally:
        notifier.stopping(f"stopping: {reason or 'on error'}")
        observer.close(sup, time.monotonic())
        sup.shutdown(timeout_s=5.0)
        if gatekeeper is not None:
            gatekeeper.stop()
        sockets.close_context(ctx, linger_ms=0)
        endpoint_file.unlink(missing_ok=True)
    figures = sup.view.figures(time.monotonic())
    if ended_unix is not None:
        figures["condition_met_unix"] = round(ended_unix, 3)
    return Outcome(code, reason, directory, figures)
