"""The supervisor's per-process state machine: pure functions of a record, a policy and an explicit `now`."""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from tandem.daemons.runtime.exit_codes import ExitCode


class State(str, Enum):
    STARTING = "STARTING"  # spawned, has not reported `running` yet
    RUNNING = "RUNNING"
    BACKOFF = "BACKOFF"  # exited unexpectedly, waiting for `next_start_at`
    STOPPING = "STOPPING"  # stop requested, SIGTERM sent
    STOPPED = "STOPPED"
    EXITED = "EXITED"  # exited cleanly on its own after RUNNING; not restarted
    FATAL = "FATAL"  # failed too often; only an operator restart brings it back


class Action(str, Enum):
    NONE = "none"
    START = "start"
    TERMINATE = "terminate"
    KILL = "kill"


@dataclass(frozen=True)
class RestartPolicy:
    """When to restart a process that exited, and when to give up on it."""

    backoff_initial_s: float = 0.5  # first restart delay; doubles per consecutive failure
    backoff_max_s: float = 30.0
    start_retries: int = 3  # consecutive failures before ever reaching RUNNING -> FATAL
    crash_loop_max: int = 5  # this many exits within crash_loop_window_s -> FATAL (even after RUNNING)
    crash_loop_window_s: float = 60.0
    backoff_reset_s: float = 10.0  # a failure after this long RUNNING restarts with the initial delay again


@dataclass(frozen=True)
class HeartbeatPolicy:
    """When a process counts as hung or stuck, and how long it gets to exit after SIGTERM."""

    liveness_timeout_s: float = 15.0  # no heartbeat this long (after the first one) -> hung -> TERMINATE
    stop_grace_s: float = 10.0  # SIGTERM, then SIGKILL after this
    start_grace_s: float = 2.0  # the same for a process killed before RUNNING: it has nothing to save yet
    first_heartbeat_s: float = 60.0  # STARTING with no heartbeat at all this long after spawn -> TERMINATE
    # keyed by a stage's first word ("build_env 3/8" -> "build_env"); applied only before RUNNING
    stage_deadlines_s: Mapping[str, float] = field(
        default_factory=lambda: {"build_env": 120.0, "connect": 60.0, "wait_weights": 300.0}
    )


@dataclass
class ProcessRecord:
    """One supervised process as the state machine sees it; `tandem status` reads it too."""

    name: str
    role: str
    state: State = State.STOPPED
    since: float = 0.0  # when the current state began
    pid: int | None = None
    restarts: int = 0  # starts after the first one
    start_failures: int = 0  # consecutive failures without reaching RUNNING
    exit_times: deque[float] = field(default_factory=deque)  # failed exits, trimmed to the crash-loop window
    last_exit_code: int | None = None
    last_error: str = ""  # reason of the last failure or kill
    last_stage: str = ""  # stage at the last exit
    stage: str = ""
    stage_since: float = 0.0
    started_at: float | None = None
    running_since: float | None = None  # when the current incarnation reached RUNNING
    last_heartbeat: float | None = None
    next_start_at: float | None = None
    terminate_sent_at: float | None = None
    kill_reason: str = ""  # why the supervisor is terminating it; "" for a requested stop
    kill_sent_at: float | None = None  # set by `killed()`; lets `due` repeat KILL only once per grace
    restart_pending: bool = False  # operator restart of a live process: its exit is not a failure
    recycle_pending: bool = False  # planned restart (memory limit, max age): not a failure, failures kept
    recycles: int = 0  # planned restarts so far
    last_recycle: str = ""  # why the last planned restart happened
    fault: str = ""  # a fault the live process reports and runs on with (a disk refusing writes); "" when none


ALIVE = frozenset({State.STARTING, State.RUNNING, State.STOPPING})


def is_alive(rec: ProcessRecord) -> bool:
    return rec.state in ALIVE


def stage_key(stage: str) -> str:
    """The stage's first word: deadlines and the `running` check ignore progress like "3/8"."""
    parts = stage.split(maxsplit=1)
    return parts[0] if parts else ""


def backoff_delay(failures: int, policy: RestartPolicy) -> float:
    """Delay before the next start after `failures` consecutive failures (1 -> initial, doubling, capped)."""
    exponent = min(max(failures, 1) - 1, 64)  # the cap makes larger exponents pointless; avoid float overflow
    return min(policy.backoff_initial_s * 2.0**exponent, policy.backoff_max_s)


def _set_state(rec: ProcessRecord, state: State, now: float) -> None:
    if rec.state != state:
        rec.state, rec.since = state, now


def started(rec: ProcessRecord, pid: int, now: float) -> None:
    """The supervisor has just spawned the process as `pid`."""
    if rec.started_at is not None:
        rec.restarts += 1
    rec.state, rec.since = State.STARTING, now
    rec.pid, rec.started_at = pid, now
    rec.running_since = None
    rec.stage, rec.stage_since = "start", now
    rec.last_heartbeat = None
    rec.next_start_at = None
    rec.terminate_sent_at = rec.kill_sent_at = None
    rec.kill_reason = ""
    rec.restart_pending = False
    rec.recycle_pending = False


def heartbeat(rec: ProcessRecord, stage: str, stage_elapsed_s: float, now: float) -> None:
    """Record a heartbeat; the first `running` stage promotes STARTING to RUNNING."""
    if not is_alive(rec):
        return  # a late beat from a process we already count as gone must not revive it
    rec.last_heartbeat = now
    # the daemon measures its own stage time, so a stage entered before our last look is dated correctly
    rec.stage, rec.stage_since = stage, now - max(stage_elapsed_s, 0.0)
    if rec.state == State.STARTING and stage_key(stage) == "running":
        _set_state(rec, State.RUNNING, now)
        rec.running_since = now
        rec.start_failures = 0


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "exited with an unknown code"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exited with code {code}"


def exited(rec: ProcessRecord, code: int | None, now: float, policy: RestartPolicy, error: str = "") -> None:
    """The process is gone with exit `code`; decide STOPPED, EXITED, BACKOFF or FATAL."""
    if not is_alive(rec):
        return  # nothing of ours was running; a stale report
    was_starting = rec.state == State.STARTING
    # As supervisord's startsecs: a process that ran fine for a while starts its backoff over.
    ran_long = (
        rec.state == State.RUNNING
        and rec.running_since is not None
        and now - rec.running_since >= policy.backoff_reset_s
    )
    terminated_by_us = rec.terminate_sent_at is not None
    rec.last_exit_code, rec.last_stage = code, rec.stage
    rec.pid, rec.stage, rec.fault = None, "", ""
    rec.terminate_sent_at = rec.kill_sent_at = None
    kill_reason, rec.kill_reason = rec.kill_reason, ""

    if rec.restart_pending:  # operator restart: straight back, a fresh slate, no failure counted
        rec.restart_pending = False
        rec.start_failures = 0
        rec.exit_times.clear()
        _set_state(rec, State.BACKOFF, now)
        rec.next_start_at = now
        return
    if rec.state == State.STOPPING:
        _set_state(rec, State.STOPPED, now)
        return
    if rec.recycle_pending:  # planned: straight back; crashes before it still count toward the crash loop
        rec.recycle_pending = False
        rec.recycles += 1
        _set_state(rec, State.BACKOFF, now)
        rec.next_start_at = now
        return
    if code == 0 and not terminated_by_us and rec.state == State.RUNNING:
        _set_state(rec, State.EXITED, now)  # finished its work (e.g. an evaluator's episode budget)
        return

    # Everything else is a failure, exit 0 included: a daemon that was not asked to stop should not stop.
    rec.last_error = error or kill_reason or _exit_reason(code)
    if code == ExitCode.SETUP and not terminated_by_us:
        # A setup mistake (env id, plug-in, algorithm vs env, device) fails the same way at every start:
        # FATAL now, with its one line, instead of a backoff ladder of identical retries.
        _set_state(rec, State.FATAL, now)
        rec.last_error = f"{rec.last_error} (a setup mistake: not restarted; `tandem config check` finds it)"
        return
    rec.exit_times.append(now)
    while rec.exit_times and now - rec.exit_times[0] > policy.crash_loop_window_s:
        rec.exit_times.popleft()
    while len(rec.exit_times) > max(policy.crash_loop_max, 1):
        rec.exit_times.popleft()
    if was_starting:
        rec.start_failures += 1
    if rec.start_failures >= policy.start_retries:
        _set_state(rec, State.FATAL, now)
        rec.last_error = f"{rec.last_error} (failed {rec.start_failures} starts in a row)"
    elif len(rec.exit_times) >= policy.crash_loop_max:
        _set_state(rec, State.FATAL, now)
        rec.last_error = (
            f"{rec.last_error} (crash loop: {len(rec.exit_times)} exits within {policy.crash_loop_window_s:g} s)"
        )
    else:
        _set_state(rec, State.BACKOFF, now)
        # start failures can be spread wider than the crash window (slow builds), so take the larger count
        failures = 1 if ran_long else max(rec.start_failures, len(rec.exit_times))
        rec.next_start_at = now + backoff_delay(failures, policy)


def terminate(rec: ProcessRecord, reason: str, now: float) -> None:
    """The supervisor decided to kill a live process (hung, stuck in a stage, over its RSS limit)."""
    if not is_alive(rec):
        return
    rec.kill_reason = reason
    if rec.terminate_sent_at is None:  # a second reason must not extend the grace already running
        rec.terminate_sent_at = now


def recycle(rec: ProcessRecord, reason: str, now: float) -> None:
    """A planned restart of a live process (over its memory limit, past its maximum age, as circus does):
    SIGTERM now, and its exit is no failure, so a steady leak recycles the process forever instead of
    ending the run FATAL. A process that is already being terminated for another reason is left to it."""
    if not is_alive(rec) or rec.terminate_sent_at is not None or rec.state == State.STOPPING:
        return
    terminate(rec, reason, now)
    rec.recycle_pending = True
    rec.last_recycle = reason
    rec.last_error = reason  # the supervisor's reason is the last error (PROTOCOL.md 2.4), planned or not


def reported_fault(rec: ProcessRecord, fault: str) -> bool:
    """A live process reports `fault`, one it runs on with ("" once it is over): shown as its last error while
    new, and kept as the last error after. True when it is new (worth a log line)."""
    if not is_alive(rec):
        return False
    new = bool(fault) and fault != rec.fault
    rec.fault = fault
    if new:
        rec.last_error = fault
    return new


def max_age_due(rec: ProcessRecord, now: float, max_age_s: float) -> bool:
    """True when a RUNNING process has run `max_age_s` (0: never), staggered by up to 10% per name so that
    actors started together are not all recycled at once."""
    if max_age_s <= 0 or rec.state != State.RUNNING or rec.running_since is None:
        return False
    stagger = (zlib.crc32(rec.name.encode()) % 1000) / 10000.0
    return now - rec.running_since >= max_age_s * (1.0 + stagger)


def killed(rec: ProcessRecord, now: float) -> None:
    """SIGKILL was sent; optional, it only keeps `due` from asking again within the grace."""
    if is_alive(rec):
        rec.kill_sent_at = now


def stop_requested(rec: ProcessRecord, now: float) -> None:
    """Stop on request: a live process gets SIGTERM now; a pending restart is cancelled."""
    if is_alive(rec):
        _set_state(rec, State.STOPPING, now)
        if rec.terminate_sent_at is None:
            rec.terminate_sent_at = now
        rec.kill_reason = ""
        rec.restart_pending = False
    elif rec.state == State.BACKOFF:
        _set_state(rec, State.STOPPED, now)
        rec.next_start_at = None


def restart_requested(rec: ProcessRecord, now: float) -> None:
    """Operator `tandem restart NAME`: start it again now, forgetting its failure counts."""
    if is_alive(rec):
        terminate(rec, "restart requested", now)
        rec.restart_pending = True
        return
    rec.start_failures = 0
    rec.exit_times.clear()
    _set_state(rec, State.BACKOFF, now)
    rec.next_start_at = now


def kill_grace_s(rec: ProcessRecord, hb: HeartbeatPolicy) -> float:
    """Seconds from SIGTERM to SIGKILL for this process. A constructor hung in native code never runs Python's
    SIGTERM handler: waiting the full grace for a process that has not started (and has nothing to
    checkpoint) only delays its rebuild."""
    return hb.start_grace_s if rec.state == State.STARTING and rec.kill_reason else hb.stop_grace_s


def due(rec: ProcessRecord, now: float, hb: HeartbeatPolicy) -> tuple[Action, str]:
    """What the supervisor should do for this process now, and why."""
    if rec.state == State.BACKOFF:
        if rec.next_start_at is not None and now >= rec.next_start_at:
            return Action.START, ""
        return Action.NONE, ""
    if not is_alive(rec):
        return Action.NONE, ""

    if rec.terminate_sent_at is not None:
        grace_s = kill_grace_s(rec, hb)
        if now < rec.terminate_sent_at + grace_s:
            return Action.NONE, ""  # a terminate is pending: no new verdicts while it exits
        if rec.kill_sent_at is not None and now < rec.kill_sent_at + grace_s:
            return Action.NONE, ""
        why = rec.kill_reason or "stop requested"
        return Action.KILL, f"{why}; still alive {now - rec.terminate_sent_at:.1f} s after SIGTERM"
    if rec.state == State.STOPPING:
        return Action.TERMINATE, "stop requested"

    if rec.last_heartbeat is None:
        if rec.state == State.STARTING and now - rec.since >= hb.first_heartbeat_s:
            return Action.TERMINATE, f"no first heartbeat within {hb.first_heartbeat_s:g} s of start"
        return Action.NONE, ""
    deadline_s = hb.stage_deadlines_s.get(stage_key(rec.stage)) if rec.state == State.STARTING else None
    if deadline_s is not None:
        # A stage with its own deadline may block the main loop (a native env constructor does), so
        # its deadline, not the liveness timeout, decides when it is hung.
        if now - rec.stage_since > deadline_s:
            return Action.TERMINATE, f"stage {rec.stage} over its {deadline_s:g} s deadline"
        return Action.NONE, ""
    silent_s = now - rec.last_heartbeat
    if silent_s > hb.liveness_timeout_s:
        return Action.TERMINATE, f"hung: no heartbeat for {silent_s:.1f} s"
    return Action.NONE, ""
