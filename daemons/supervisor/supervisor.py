"""The supervisor: starts daemons, feeds their heartbeats to the state machine, and acts on what it says is due."""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

from tandem.daemons.main import DaemonSpec
from tandem.daemons.runtime import stack_dump
from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.runtime.names import Role, learner_policy, replica_rank
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.supervisor import commands, states
from tandem.daemons.supervisor.children import Child
from tandem.daemons.supervisor.exit_reason import STACK_LINES, hung_at, last_error_line
from tandem.daemons.supervisor.faults import disk_fault
from tandem.daemons.supervisor.progress import RunView
from tandem.daemons.supervisor.registration import Registration, parse_registration
from tandem.daemons.supervisor.replicas import ReplicaSets
from tandem.daemons.supervisor.states import Action, HeartbeatPolicy, ProcessRecord, RestartPolicy, State
from tandem.daemons.supervisor.supervised import Supervised
from tandem.daemons.supervisor.tokens import StartTokens
from tandem.protocol import ControlReply, ControlRequest, Heartbeat

log = logging.getLogger(__name__)
BUILD_STAGES = ("start", "wait_start_token", "build_env")


def policies(config: RunConfig) -> tuple[RestartPolicy, HeartbeatPolicy]:
    s = config.supervisor
    restart = RestartPolicy(
        backoff_initial_s=s.backoff_initial_s,
        backoff_max_s=s.backoff_max_s,
        start_retries=s.start_retries,
        crash_loop_max=s.crash_loop_max,
        crash_loop_window_s=s.crash_loop_window_s,
        backoff_reset_s=s.backoff_reset_s,
    )
    heartbeat = HeartbeatPolicy(
        liveness_timeout_s=s.liveness_timeout_s,
        stop_grace_s=s.stop_grace_s,
        first_heartbeat_s=s.first_heartbeat_s,
        stage_deadlines_s={
            "build_env": s.build_env_deadline_s,
            "connect": s.connect_deadline_s,
            "wait_weights": s.wait_weights_deadline_s,
        },
    )
    return restart, heartbeat


def token_lease_s(lease_s: float, build_deadline_s: float) -> float:
    """The start-token lease in force: at most half the build deadline, so a hung builder lends its token on
    well before it is killed whatever the config says (0 stays 0: never lend)."""
    return min(lease_s, build_deadline_s / 2) if lease_s > 0 else 0.0


class Supervisor:
    """Owns the process table of one run (`processes`: one `Supervised` per name, those it starts and those it
    watches). Call `step(now)` often and `handle()` for each control message."""

    def __init__(
        self,
        config: RunConfig,
        config_path: Path,
        control_endpoint: str,
        logs: Path,
        specs: list[DaemonSpec],
        adopt: bool = False,
        started: float | None = None,
        plugin_paths: tuple[str, ...] = (),
    ):
        self.config, self.config_path, self.control_endpoint, self.logs = config, config_path, control_endpoint, logs
        # adopt: watch any daemon that heartbeats here (started by systemd or tmux), as joined learners are watched
        self.adopt = adopt
        self.restart_policy, self.heartbeat_policy = policies(config)
        self.plugin_paths = plugin_paths
        self.view = RunView(config.stop, time.monotonic() if started is None else started)
        # the ones it starts first, in plan order; daemons that join by themselves (a GPU learner) come after
        self.processes: dict[str, Supervised] = {}
        for spec in specs:
            self.add(spec)
        self.tokens = StartTokens(config.supervisor.max_concurrent_starts)
        self.registry: dict[str, Registration] = {}  # policy -> what its learner (replica 0) registered
        self.replicas = ReplicaSets(config)  # policies trained by several learner replicas
        self.stopping = False
        self.stop_requested_by: str | None = None
        s = config.supervisor
        self.rss_limits = {
            "actor": s.actor_rss_limit_mb << 20,
            "learner": s.learner_rss_limit_mb << 20,
            "evaluator": s.evaluator_rss_limit_mb << 20,
        }
        self.faults: dict[str, str] = {}  # the supervisor's own faults it runs on with (metrics.jsonl refused)

    # ------------------------------------------------------------------ processes

    def add(self, spec: DaemonSpec) -> Supervised:
        """Supervise a daemon this supervisor starts (it runs with the run's config file and control socket)."""
        spec = replace(
            spec,
            config_file=str(self.config_path),
            control=self.control_endpoint,
            die_with_parent=True,
            supervisor_pid=os.getpid(),
            plugin_paths=self.plugin_paths,
        )
        proc = self.processes[spec.name] = Supervised(ProcessRecord(spec.name, spec.role), spec)
        return proc

    def managed(self) -> list[Supervised]:
        """The processes this supervisor starts, in the order they were planned."""
        return [proc for proc in self.processes.values() if proc.managed]

    def start_all(self, now: float) -> None:
        for proc in self.managed():
            self._start(proc, now)

    def _start(self, proc: Supervised, now: float) -> None:
        assert proc.spec is not None  # only a managed process is started
        child = Child(proc.name, proc.spec, self.logs / f"{proc.name}.log")
        child.start()
        proc.child = child
        proc.new_incarnation()
        states.started(proc.record, child.pid, now)
        log.info("started %s (pid %s)", proc.name, child.pid)

    def step(self, now: float) -> None:
        """Reap exits, then start, terminate or kill whatever the state machine says is due."""
        self._release_lost_tokens(now)
        for proc in self.processes.values():
            if proc.worker_dumps is not None and proc.worker_dumps.poll(now):
                proc.worker_dumps = None
        for proc in self.managed():
            name, rec, child = proc.name, proc.record, proc.child
            if child is not None and (code := child.poll()) is not None:
                proc.child = None
                proc.worker_dumps = None  # no marker may land in the next incarnation's log
                self.tokens.release(name)
                pid = child.pid
                if rec.state == State.STOPPING:
                    error, why = "", "stop requested"
                elif rec.recycle_pending:  # planned: its reason is already the last error
                    error, why = "", rec.kill_reason
                elif rec.kill_reason:  # hung or over a deadline: where it hung, from the stack it dumped
                    error = why = rec.kill_reason + hung_at(child.log_tail(STACK_LINES))
                else:
                    error = why = self.last_error(proc, child, code)
                states.exited(rec, code, now, self.restart_policy, error=error)
                self._replica_ended(name, now)
                log.log(
                    logging.WARNING if rec.state != State.STOPPED else logging.INFO,
                    "%s (pid %s) exited with code %s -> %s: %s",
                    name,
                    pid,
                    code,
                    rec.state.value,
                    rec.last_error if rec.state == State.FATAL else why,  # FATAL adds why it gave up
                )
            self._check_memory(proc, now)
            action, reason = states.due(rec, now, self.heartbeat_policy)
            if action == Action.START and not self.stopping:
                self._start(proc, now)
            elif action == Action.TERMINATE:
                if rec.state != State.STOPPING:
                    states.terminate(rec, reason, now)
                    log.warning("terminating %s: %s", name, reason)
                    proc.signal(stack_dump.STACK_DUMP_SIGNAL)  # every thread's stack into its log, hung or not
                    if proc.child is not None and proc.child.pid is not None:
                        proc.worker_dumps = stack_dump.WorkerDumps(proc.child.pid, proc.child.log_path, now)
                else:
                    rec.terminate_sent_at = now
                proc.signal(signal.SIGTERM)
            elif action == Action.KILL:
                log.warning(
                    "killing %s after %.1f s of grace: %s",
                    name,
                    states.kill_grace_s(rec, self.heartbeat_policy),
                    reason,
                )
                proc.signal(signal.SIGKILL)
                states.killed(rec, now)

    def _replica_ended(self, name: str, now: float) -> None:
        """A learner replica ended: its actors are sent to the others, which re-form their group without it; it
        joins them again when it is back (restarted as any process is)."""
        self.replicas.lost(name)  # nothing for a learner with no replicas, or any other daemon

    def _release_lost_tokens(self, now: float) -> None:
        """Give back start tokens that nobody would: a daemon we did not start that went silent while
        building, and a builder stuck in one stage past `start_token_lease_s` (it builds on until its
        deadline, but a hung constructor no longer keeps every other actor from starting)."""
        timeout = self.heartbeat_policy.liveness_timeout_s
        lease = token_lease_s(self.config.supervisor.start_token_lease_s, self.config.supervisor.build_env_deadline_s)
        for name in list(self.tokens.holders):
            proc = self.processes.get(name)
            if proc is None or not proc.managed:
                age = proc.heartbeat_age(now) if proc is not None else None
                if age is not None and age > timeout:
                    self.tokens.release(name)
            elif lease > 0 and (rec := proc.record).stage and now - rec.stage_since > lease:
                self.tokens.release(name)
                log.warning(
                    "%s has been in stage %s for %.0f s: its start token goes to the next builder",
                    name,
                    rec.stage,
                    now - rec.stage_since,
                )

    def _check_memory(self, proc: Supervised, now: float) -> None:
        rec = proc.record
        limit = self.rss_limits.get(rec.role, 0)
        if not states.is_alive(rec) or rec.terminate_sent_at is not None:
            return
        # Read from the kernel between heartbeats (a heartbeat's figure is up to a second old, and a process
        # stuck in native code sends none); the heartbeat's figure serves where the read fails.
        rss = proc.memory.current(rec.pid, now) if limit else None
        if rss is None and proc.beat is not None:
            rss = proc.beat.rss_bytes
        if limit and rss is not None and rss > limit:
            reason = f"rss {rss >> 20} MiB over its limit of {limit >> 20} MiB"
        elif rec.role != Role.LEARNER and states.max_age_due(rec, now, self.config.supervisor.max_age_s):
            reason = f"older than supervisor.max_age_s ({self.config.supervisor.max_age_s:g} s)"
        else:
            return
        states.recycle(rec, reason, now)
        log.warning("recycling %s: %s", proc.name, reason)
        proc.signal(signal.SIGTERM)  # a learner checkpoints on SIGTERM before it exits

    def stop(self, now: float, by: str = "") -> None:
        """Stop every daemon (SIGTERM now, SIGKILL after the grace, through `step`)."""
        self.stopping = True
        self.stop_requested_by = self.stop_requested_by or by
        for proc in self.managed():
            was_alive = states.is_alive(proc.record)
            states.stop_requested(proc.record, now)
            if was_alive:
                proc.signal(signal.SIGTERM)

    def all_down(self) -> bool:
        return not any(states.is_alive(proc.record) for proc in self.managed())

    def shutdown(self, timeout_s: float) -> None:
        """Stop everything and wait, at most `timeout_s` beyond the grace, until no child is left."""
        self.stop(time.monotonic())
        deadline = time.monotonic() + self.heartbeat_policy.stop_grace_s + timeout_s
        while not self.all_down() and time.monotonic() < deadline:
            self.step(time.monotonic())
            time.sleep(0.02)
        for proc in self.processes.values():
            if proc.child is not None:
                proc.child.signal(signal.SIGKILL)
                proc.child.wait(5.0)

    def fatal_reason(self) -> str | None:
        """Why the run cannot go on: every learner is FATAL (any one with supervisor.end_run_on_learner_fatal), or
        every actor is. One policy's learner down in a multi-policy run is said once; the others train on."""
        procs = self.managed()
        learners = [proc for proc in procs if proc.record.role == Role.LEARNER]
        fatal = [proc.record for proc in learners if proc.record.state == State.FATAL]
        if fatal and (len(fatal) == len(learners) or self.config.supervisor.end_run_on_learner_fatal):
            return f"{fatal[0].name} is FATAL: {fatal[0].last_error}"
        for proc in learners:
            rec = proc.record
            if rec.state == State.FATAL and not proc.said_down:
                log.error(
                    "policy %s is down (%s is FATAL: %s); the other policies train on",
                    learner_policy(rec.name),
                    rec.name,
                    rec.last_error,
                )
            proc.said_down = rec.state == State.FATAL  # a restarted learner can go down, and be said, again
        actors = [proc.record for proc in procs if proc.record.role == Role.ACTOR]
        if actors and all(r.state == State.FATAL for r in actors):
            return f"every actor is FATAL; {actors[0].name}: {actors[0].last_error}"
        return None

    # ------------------------------------------------------------------ control messages

    def heartbeat(self, beat: Heartbeat, now: float) -> None:
        proc = self.processes.get(beat.name)
        if (proc is None and self.adopt) or (proc is not None and not proc.managed):
            self._watched_heartbeat(proc, beat, now)  # a daemon started elsewhere: watched, not managed
            return
        if proc is None:
            self.view.unknown_heartbeats += 1
            log_dropped(
                log,
                f"a heartbeat from {beat.name!r} (pid {beat.pid}), which this supervisor did not start",
                self.view.unknown_heartbeats,
                "start it with --control only under `tandem supervise --no-children`",
            )
            return
        rec = proc.record
        if beat.pid != rec.pid:
            return  # a killed incarnation's last words
        proc.heard(beat, now)
        states.heartbeat(rec, beat.stage, beat.stage_elapsed_s, now)
        if states.reported_fault(rec, disk_fault(beat.counters)):
            log.warning("%s: %s", beat.name, rec.fault)
        self._heard(beat, now)

    def _watched(self, name: str, role: str) -> Supervised:
        """The record of a daemon started elsewhere, made when it is first heard of."""
        proc = self.processes.get(name)
        if proc is None:
            proc = self.processes[name] = Supervised(ProcessRecord(name, role))
        return proc

    def _watched_heartbeat(self, proc: Supervised | None, beat: Heartbeat, now: float) -> None:
        if proc is None:
            proc = self._watched(beat.name, beat.role)
        previous = proc.beat
        if previous is None or previous.incarnation != beat.incarnation:
            proc.new_incarnation()  # a restarted daemon counts from 0 again
            if previous is None:
                log.info("%s joined from %s (pid %s)", beat.name, beat.host, beat.pid)
        proc.host, proc.record.pid = beat.host, beat.pid
        proc.heard(beat, now)
        self._heard(beat, now)

    def _heard(self, beat: Heartbeat, now: float) -> None:
        if not beat.stage.startswith(BUILD_STAGES):
            self.tokens.release(beat.name)
        self.view.heartbeat(beat, now)

    def register(self, request: ControlRequest, now: float) -> ControlReply:
        args = request.args
        entry = parse_registration(args)
        if entry is None:
            return ControlReply(
                request.request_id,
                False,
                "bad_args",
                "register needs endpoints.transitions, .weights and .snapshot (a replica above 0: .transitions)",
            )
        policy, rank = str(args.get("policy", "")), replica_rank(entry.name)
        group = self.replicas.group_of(entry.name)
        previous = group.registered.get(rank) if group is not None and rank > 0 else self.registry.get(policy)
        self.replicas.register(entry.name, entry)
        if rank == 0:  # a lone learner, or replica 0: the one that publishes the policy's weights
            self.registry[policy] = entry
        proc = self.processes.get(entry.name)
        if proc is None or not proc.managed:
            proc = self._watched(entry.name, entry.role)  # what it registers is what status shows of it
            proc.record.role, proc.record.pid = entry.role, entry.pid
            proc.host, proc.insecure = entry.host, entry.insecure
        if previous is None or previous.endpoints != entry.endpoints:
            log.info(
                "%s registered policy %r at %s%s",
                entry.name,
                args.get("policy"),
                entry.endpoints,
                " (INSECURE)" if entry.insecure else "",
            )
        return ControlReply(request.request_id, True)

    def handle(self, request: ControlRequest, now: float) -> ControlReply:
        """Answer one control request (the table of commands is in `commands.py`)."""
        return commands.handle(self, request, now)

    def last_error(self, proc: Supervised, child: Child, code: int) -> str:
        """Why a child ended: the error its last heartbeat carried, else its log's last error line or exit code."""
        beat = proc.beat
        if beat is not None and beat.pid == child.pid and beat.error:
            return beat.error
        return last_error_line(child, code)
