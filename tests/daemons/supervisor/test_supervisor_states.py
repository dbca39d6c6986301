"""The supervisor's state machine, driven by an explicit clock: no sleeps, no processes."""

from __future__ import annotations

import pytest

from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.states import (
    Action,
    HeartbeatPolicy,
    ProcessRecord,
    RestartPolicy,
    State,
)

RP = RestartPolicy(
    backoff_initial_s=0.5, backoff_max_s=30.0, start_retries=3, crash_loop_max=5, crash_loop_window_s=60.0
)
HB = HeartbeatPolicy(
    liveness_timeout_s=15.0,
    stop_grace_s=10.0,
    first_heartbeat_s=60.0,
    stage_deadlines_s={"build_env": 120.0, "connect": 60.0, "wait_weights": 300.0},
)


def running_record(now: float = 0.0, pid: int = 100) -> ProcessRecord:
    rec = ProcessRecord("actor-0", "actor")
    states.started(rec, pid, now)
    states.heartbeat(rec, "running", 0.0, now + 1.0)
    assert rec.state == State.RUNNING
    return rec


def test_full_lifecycle_start_run_stop():
    rec = ProcessRecord("learner-a", "learner")
    assert rec.state == State.STOPPED and not states.is_alive(rec)

    states.started(rec, 42, now=10.0)
    assert (rec.state, rec.pid, rec.stage, rec.since, rec.restarts) == (State.STARTING, 42, "start", 10.0, 0)
    assert states.is_alive(rec)

    states.heartbeat(rec, "wait_weights", 2.0, now=15.0)
    assert rec.state == State.STARTING and rec.stage_since == 13.0
    states.heartbeat(rec, "running", 0.5, now=20.0)
    assert rec.state == State.RUNNING and rec.since == 20.0
    assert states.due(rec, 21.0, HB) == (Action.NONE, "")

    states.stop_requested(rec, now=30.0)
    assert rec.state == State.STOPPING and rec.terminate_sent_at == 30.0 and rec.kill_reason == ""
    assert states.due(rec, 31.0, HB) == (Action.NONE, "")  # SIGTERM already sent by stop_requested

    states.exited(rec, 0, now=32.0, policy=RP)
    assert rec.state == State.STOPPED and rec.pid is None and not states.is_alive(rec)
    assert rec.last_exit_code == 0 and rec.last_stage == "running" and rec.last_error == ""
    assert states.due(rec, 1000.0, HB) == (Action.NONE, "")


def test_stopping_without_terminate_asks_for_one():
    rec = running_record()
    states.stop_requested(rec, 5.0)
    rec.terminate_sent_at = None  # e.g. the caller set STOPPING before it could signal
    assert states.due(rec, 6.0, HB) == (Action.TERMINATE, "stop requested")


def test_backoff_delay_doubles_and_caps():
    assert [states.backoff_delay(n, RP) for n in range(1, 9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert states.backoff_delay(0, RP) == 0.5
    assert states.backoff_delay(10_000, RP) == 30.0


def test_start_failures_go_fatal_after_start_retries_keeping_the_evidence():
    rec = ProcessRecord("actor-1", "actor")
    now = 0.0
    delays = []
    for attempt in range(1, RP.start_retries + 1):
        states.started(rec, 200 + attempt, now)
        states.heartbeat(rec, f"build_env {attempt}/8", 1.0, now + 2.0)
        now += 100.0  # spread wider than the crash window: only start_failures can make it FATAL
        states.exited(rec, 1, now, RP, error=f"error: emulator crashed ({attempt})")
        assert rec.start_failures == attempt
        if attempt < RP.start_retries:
            assert rec.state == State.BACKOFF
            delays.append(rec.next_start_at - now)
            assert states.due(rec, rec.next_start_at - 0.01, HB) == (Action.NONE, "")
            assert states.due(rec, rec.next_start_at, HB) == (Action.START, "")
            now = rec.next_start_at
    assert delays == [0.5, 1.0]
    assert rec.state == State.FATAL
    assert rec.last_exit_code == 1 and rec.last_stage == "build_env 3/8"
    assert rec.last_error.startswith("error: emulator crashed (3)")
    assert rec.restarts == 2
    assert states.due(rec, now + 1000.0, HB) == (Action.NONE, "")


def test_a_setup_mistake_is_fatal_at_the_first_exit_and_a_terminated_one_is_not():
    rec = ProcessRecord("actor-0", "actor")
    states.started(rec, 300, 0.0)
    states.heartbeat(rec, "build_env 1/8", 1.0, 2.0)
    states.exited(rec, int(ExitCode.SETUP), 3.0, RP, error="env.id 'CartPol-v1': unknown")
    assert rec.state == State.FATAL and rec.start_failures == 0
    assert rec.last_error.startswith("env.id 'CartPol-v1': unknown") and "not restarted" in rec.last_error
    assert states.due(rec, 1000.0, HB) == (Action.NONE, "")
    other = running_record()
    states.terminate(other, "hung", 5.0)  # asked to go: whatever code it ends with, the usual ladder applies
    states.exited(other, int(ExitCode.SETUP), 6.0, RP)
    assert other.state == State.BACKOFF


def test_exit_message_defaults_to_kill_reason_then_code():
    rec = ProcessRecord("a", "actor")
    states.started(rec, 1, 0.0)
    states.exited(rec, 3, 1.0, RP)
    assert rec.last_error == "exited with code 3"
    states.started(rec, 2, 2.0)
    states.terminate(rec, "stage build_env 1/8 over its 120 s deadline", 3.0)
    states.exited(rec, -15, 4.0, RP)
    assert rec.last_error == "stage build_env 1/8 over its 120 s deadline"
    assert rec.kill_reason == "" and rec.terminate_sent_at is None


def test_reaching_running_resets_start_failures():
    rec = ProcessRecord("a", "actor")
    states.started(rec, 1, 0.0)
    states.exited(rec, 1, 1.0, RP)
    assert rec.start_failures == 1
    states.started(rec, 2, 2.0)
    states.heartbeat(rec, "running", 0.0, 3.0)
    assert rec.start_failures == 0
    states.exited(rec, 1, 100.0, RP)  # a crash after RUNNING is not a start failure
    assert rec.start_failures == 0 and rec.state == State.BACKOFF


def test_crash_loop_after_running_goes_fatal_within_the_window():
    rec = ProcessRecord("a", "actor")
    now = 0.0
    for n in range(1, RP.crash_loop_max + 1):
        states.started(rec, n, now)
        states.heartbeat(rec, "running", 0.0, now + 1.0)
        now += 5.0
        states.exited(rec, 1, now, RP)
        if n < RP.crash_loop_max:
            assert rec.state == State.BACKOFF
            assert rec.next_start_at - now == states.backoff_delay(n, RP)
            now = rec.next_start_at
    assert now < RP.crash_loop_window_s
    assert rec.state == State.FATAL and "crash loop" in rec.last_error


def test_crashes_spread_out_keep_restarting():
    rec = ProcessRecord("a", "actor")
    now = 0.0
    for n in range(1, 4 * RP.crash_loop_max):
        states.started(rec, n, now)
        states.heartbeat(rec, "running", 0.0, now + 1.0)
        now += 20.0  # 3 exits per 60 s window, under crash_loop_max
        states.exited(rec, 1, now, RP)
        assert rec.state == State.BACKOFF
        assert len(rec.exit_times) <= RP.crash_loop_max
        now = rec.next_start_at
    assert rec.restarts == 4 * RP.crash_loop_max - 2


def test_backoff_starts_over_after_running_fine_but_crashes_still_count():
    rec = ProcessRecord("a", "actor")
    now = 0.0
    for n in range(1, 4):  # three quick crashes: the delay doubles
        states.started(rec, n, now)
        states.heartbeat(rec, "running", 0.0, now + 1.0)
        now += 2.0
        states.exited(rec, 1, now, RP)
        assert rec.next_start_at - now == states.backoff_delay(n, RP)
        now = rec.next_start_at
    states.started(rec, 4, now)
    states.heartbeat(rec, "running", 0.0, now + 1.0)
    now += 1.0 + RP.backoff_reset_s  # then it ran fine for a while
    states.exited(rec, 1, now, RP)
    assert rec.state == State.BACKOFF and rec.next_start_at - now == RP.backoff_initial_s
    assert len(rec.exit_times) == 4  # the crash-loop count is not forgiven


def test_recycling_forever_never_goes_fatal_but_crashes_still_do():
    rec = running_record()
    now = 10.0
    for n in range(3 * RP.crash_loop_max):  # a steady leak: recycled again and again within the window
        states.recycle(rec, "rss 900 MiB over its limit of 800 MiB", now)
        assert rec.terminate_sent_at == now and rec.kill_reason.startswith("rss")
        states.exited(rec, 0, now + 0.5, RP)
        assert rec.state == State.BACKOFF and rec.next_start_at == now + 0.5  # straight back
        now += 1.0
        states.started(rec, 200 + n, now)
        states.heartbeat(rec, "running", 0.0, now + 0.1)
    assert rec.recycles == 3 * RP.crash_loop_max and not rec.exit_times
    assert rec.last_error == rec.last_recycle == "rss 900 MiB over its limit of 800 MiB"  # PROTOCOL.md 2.4
    for n in range(RP.crash_loop_max):  # real crashes still end in FATAL
        now += 1.0
        states.exited(rec, 1, now, RP)
        if rec.state == State.FATAL:
            break
        start = rec.next_start_at
        states.started(rec, 300 + n, start)
        states.heartbeat(rec, "running", 0.0, start + 0.1)
        now = start + 0.2
    assert rec.state == State.FATAL and "crash loop" in rec.last_error


def test_max_age_is_due_only_when_running_that_long_staggered_per_name():
    rec = running_record(now=0.0)  # RUNNING since 1.0
    assert not states.max_age_due(rec, 50.0, 0.0)  # 0 turns it off
    assert not states.max_age_due(rec, 1.0 + 99.9, 100.0)
    assert states.max_age_due(rec, 1.0 + 111.0, 100.0)  # the stagger is at most 10%
    starting = ProcessRecord("actor-1", "actor")
    states.started(starting, 5, 0.0)
    assert not states.max_age_due(starting, 1000.0, 100.0)


def test_a_process_killed_before_running_gets_the_short_grace():
    rec = ProcessRecord("actor-0", "actor")
    states.started(rec, 7, 0.0)
    states.heartbeat(rec, "build_env 1/8", 0.0, 1.0)
    action, _ = states.due(rec, 200.0, HB)
    assert action == Action.TERMINATE
    states.terminate(rec, "stage build_env 1/8 over its 120 s deadline", 200.0)
    assert states.due(rec, 200.0 + HB.start_grace_s - 0.1, HB)[0] == Action.NONE
    assert states.due(rec, 200.0 + HB.start_grace_s + 0.1, HB)[0] == Action.KILL


def test_hung_at_reads_the_main_threads_innermost_frame():
    from tandem.daemons.supervisor.supervisor import hung_at

    dump = """some log line
Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/selectors.py", line 320 in poll
  File "/usr/lib/python3.11/threading.py", line 1002 in run

Thread 0x00007f0000000002 (most recent call first):
  File "/srv/game/envs.py", line 28 in hang_in_init
  File "/srv/tandem/daemons/envs/gym_envs.py", line 60 in make_env
"""
    assert hung_at(dump) == "; at /srv/game/envs.py:28 in hang_in_init"
    assert hung_at("no dump here\n") == ""


def test_hung_at_names_each_env_worker_dumped_after_the_daemon():
    from tandem.daemons.runtime.stack_dump import WORKER_BEGIN, WORKERS_END
    from tandem.daemons.supervisor.supervisor import hung_at

    old_worker = f"""{WORKER_BEGIN.format(pid=7)}
Current thread 0x1 (most recent call first):
  File "/srv/old.py", line 1 in stale
{WORKERS_END}
"""
    dump = (
        old_worker
        + f"""Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 395 in _recv
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 430 in _recv_bytes

{WORKER_BEGIN.format(pid=4242)}
Current thread 0x00007f0000000003 (most recent call first):
  File "/srv/game/envs.py", line 28 in hang_in_init
  File "/srv/tandem/daemons/envs/vector.py", line 40 in __call__

{WORKER_BEGIN.format(pid=4243)}
Current thread 0x00007f0000000004 (most recent call first):
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 395 in _recv

{WORKERS_END}
"""
    )
    assert hung_at(dump) == (
        "; at /usr/lib/python3.11/multiprocessing/connection.py:395 in _recv"
        "; env worker pid 4242 at /srv/game/envs.py:28 in hang_in_init"
        "; env worker pid 4243 at /usr/lib/python3.11/multiprocessing/connection.py:395 in _recv"
    )


def test_liveness_timeout_terminates_then_kills_after_grace():
    rec = running_record(now=0.0)
    states.heartbeat(rec, "running", 30.0, now=50.0)
    assert states.due(rec, 65.0, HB) == (Action.NONE, "")
    action, reason = states.due(rec, 65.2, HB)
    assert action == Action.TERMINATE and reason == "hung: no heartbeat for 15.2 s"

    states.terminate(rec, reason, 65.2)
    assert rec.state == State.RUNNING and rec.terminate_sent_at == 65.2
    assert states.due(rec, 75.0, HB) == (Action.NONE, "")  # within the grace: neither a second TERMINATE nor KILL
    action, reason = states.due(rec, 75.2, HB)
    assert action == Action.KILL and reason.startswith("hung: no heartbeat for 15.2 s")

    states.killed(rec, 75.2)
    assert states.due(rec, 80.0, HB) == (Action.NONE, "")
    assert states.due(rec, 85.2, HB)[0] == Action.KILL  # still not dead: ask again, once per grace

    states.exited(rec, -9, 86.0, RP)
    assert rec.state == State.BACKOFF and rec.last_error == "hung: no heartbeat for 15.2 s"


def test_a_second_terminate_does_not_extend_the_grace():
    rec = running_record()
    states.terminate(rec, "hung: no heartbeat for 16.0 s", 20.0)
    states.terminate(rec, "rss 900 MiB over limit 512 MiB", 25.0)
    assert rec.terminate_sent_at == 20.0 and rec.kill_reason == "rss 900 MiB over limit 512 MiB"


def test_first_heartbeat_deadline():
    rec = ProcessRecord("a", "actor")
    states.started(rec, 7, 100.0)
    assert states.due(rec, 159.9, HB) == (Action.NONE, "")
    assert states.due(rec, 160.0, HB) == (Action.TERMINATE, "no first heartbeat within 60 s of start")


def test_starting_after_first_heartbeat_uses_liveness_timeout():
    rec = ProcessRecord("a", "actor")
    states.started(rec, 7, 0.0)
    states.heartbeat(rec, "load_checkpoint", 0.0, 1.0)
    assert states.due(rec, 16.0, HB) == (Action.NONE, "")
    assert states.due(rec, 16.5, HB)[0] == Action.TERMINATE


def test_stage_deadline_matches_the_first_word_while_not_running():
    rec = ProcessRecord("a", "actor")
    states.started(rec, 7, 0.0)
    now = 0.0
    while now < 130.0:  # heartbeats keep coming, but the stage does not move on
        now += 5.0
        states.heartbeat(rec, "build_env 2/8", now - 3.0, now)
        action, reason = states.due(rec, now, HB)
        if now - 3.0 <= 120.0:
            assert action == Action.NONE, now
        else:
            assert (action, reason) == (Action.TERMINATE, "stage build_env 2/8 over its 120 s deadline")
            break
    assert now == 125.0


def test_stage_without_deadline_and_running_are_not_checked():
    rec = ProcessRecord("a", "learner")
    states.started(rec, 7, 0.0)
    states.heartbeat(rec, "load_checkpoint", 500.0, 600.0)
    assert states.due(rec, 601.0, HB) == (Action.NONE, "")

    rec = running_record()
    states.heartbeat(rec, "build_env 2/8", 500.0, 600.0)  # e.g. rebuilding envs while RUNNING
    assert rec.state == State.RUNNING
    assert states.due(rec, 601.0, HB) == (Action.NONE, "")


@pytest.mark.parametrize("state", [State.STOPPED, State.BACKOFF, State.EXITED, State.FATAL])
def test_processes_that_are_not_alive_are_not_checked(state):
    rec = running_record()
    rec.state, rec.next_start_at = state, None
    assert states.due(rec, 10_000.0, HB) == (Action.NONE, "")


def test_backoff_is_not_checked_for_liveness_and_stops_cleanly():
    rec = running_record()
    states.exited(rec, 1, 5.0, RP)
    assert rec.state == State.BACKOFF
    assert states.due(rec, 5.1, HB) == (Action.NONE, "")
    states.stop_requested(rec, 5.2)
    assert rec.state == State.STOPPED and rec.next_start_at is None
    assert states.due(rec, 1000.0, HB) == (Action.NONE, "")


def test_restart_requested_from_fatal():
    rec = ProcessRecord("a", "actor")
    now = 0.0
    for n in range(RP.start_retries):
        states.started(rec, n, now)
        states.exited(rec, 1, now + 1.0, RP)
        now += 2.0 + states.backoff_delay(n + 1, RP)
    assert rec.state == State.FATAL
    states.restart_requested(rec, now)
    assert rec.state == State.BACKOFF and rec.start_failures == 0 and not rec.exit_times
    assert states.due(rec, now, HB) == (Action.START, "")
    states.started(rec, 99, now)
    states.exited(rec, 1, now + 1.0, RP)
    assert rec.state == State.BACKOFF  # a fresh budget of start retries


def test_restart_requested_from_running_is_not_a_failure():
    rec = running_record()
    states.restart_requested(rec, 10.0)
    assert rec.state == State.RUNNING and rec.kill_reason == "restart requested" and rec.terminate_sent_at == 10.0
    assert states.due(rec, 11.0, HB) == (Action.NONE, "")
    assert states.due(rec, 20.0, HB)[0] == Action.KILL
    states.exited(rec, -15, 12.0, RP)
    assert rec.state == State.BACKOFF and rec.next_start_at == 12.0
    assert not rec.exit_times and rec.start_failures == 0 and rec.last_error == ""
    assert states.due(rec, 12.0, HB) == (Action.START, "")
    states.started(rec, 101, 12.0)
    assert rec.restarts == 1 and rec.kill_reason == "" and rec.terminate_sent_at is None


@pytest.mark.parametrize("state", [State.STOPPED, State.EXITED, State.BACKOFF])
def test_restart_requested_from_idle_states(state):
    rec = running_record()
    states.exited(rec, 1, 5.0, RP)
    rec.state = state
    states.restart_requested(rec, 7.0)
    assert rec.state == State.BACKOFF and rec.next_start_at == 7.0 and not rec.exit_times


def test_stop_after_restart_request_wins():
    rec = running_record()
    states.restart_requested(rec, 10.0)
    states.stop_requested(rec, 11.0)
    assert rec.state == State.STOPPING and rec.terminate_sent_at == 10.0
    states.exited(rec, 0, 12.0, RP)
    assert rec.state == State.STOPPED


def test_clean_unexpected_exit_from_running_is_exited():
    rec = running_record()
    states.exited(rec, 0, 50.0, RP)
    assert rec.state == State.EXITED and rec.last_exit_code == 0 and rec.last_error == ""
    assert not rec.exit_times
    assert states.due(rec, 10_000.0, HB) == (Action.NONE, "")


def test_exit_zero_is_a_failure_while_starting_or_when_we_terminated_it():
    rec = ProcessRecord("a", "actor")
    states.started(rec, 1, 0.0)
    states.exited(rec, 0, 1.0, RP)
    assert rec.state == State.BACKOFF and rec.start_failures == 1 and rec.last_error == "exited with code 0"

    rec = running_record()
    states.terminate(rec, "rss 900 MiB over limit 512 MiB", 5.0)
    states.exited(rec, 0, 6.0, RP)  # a learner checkpoints on SIGTERM and exits 0
    assert rec.state == State.BACKOFF and rec.last_error == "rss 900 MiB over limit 512 MiB"


def test_heartbeats_are_ignored_after_fatal_and_other_dead_states():
    rec = ProcessRecord("a", "actor")
    for n in range(RP.start_retries):
        states.started(rec, n, float(n))
        states.exited(rec, 1, n + 0.5, RP)
    assert rec.state == State.FATAL
    before = (rec.last_heartbeat, rec.stage, rec.stage_since, rec.since)
    states.heartbeat(rec, "running", 0.0, 100.0)
    assert rec.state == State.FATAL and (rec.last_heartbeat, rec.stage, rec.stage_since, rec.since) == before

    rec = running_record()
    states.exited(rec, 1, 5.0, RP)
    states.heartbeat(rec, "running", 0.0, 5.1)  # the dead incarnation's last words
    assert rec.state == State.BACKOFF and rec.last_heartbeat == 1.0


def test_exited_and_terminate_on_a_dead_record_are_ignored():
    rec = ProcessRecord("a", "actor")
    states.exited(rec, 1, 1.0, RP)
    states.terminate(rec, "hung", 1.0)
    assert rec.state == State.STOPPED and rec.last_exit_code is None and rec.terminate_sent_at is None


def test_a_stage_with_a_deadline_may_block_the_loop_until_that_deadline():
    # A native env constructor blocks the main loop, so no heartbeats come: only the stage deadline applies.
    hb = HeartbeatPolicy(liveness_timeout_s=3.0, stage_deadlines_s={"build_env": 30.0})
    rec = ProcessRecord("a", "actor")
    states.started(rec, 7, 0.0)
    states.heartbeat(rec, "build_env 1/8", 0.0, 1.0)
    assert states.due(rec, 20.0, hb) == (Action.NONE, "")
    action, reason = states.due(rec, 31.5, hb)
    assert action == Action.TERMINATE and "build_env 1/8" in reason and "30 s deadline" in reason
