"""`tandem up` as a user runs it: stops at a condition, on SIGTERM, and when a daemon cannot start."""

from __future__ import annotations

import json
import signal
import time

import psutil

from tandem.client.harness import descendants, kill_session
from tandem.daemons.runtime.exit_codes import ExitCode
from tests.system.harness import finish, up


def test_up_stops_at_env_steps_with_exit_0(tmp_path):
    proc = up(tmp_path, "stop.env_steps=3000", "eval.enabled=false", "actors.count=2")
    out, err = finish(proc, 90)
    assert proc.returncode == ExitCode.OK, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["result"] == "ok" and "env steps" in summary["reason"]
    assert summary["env_steps"] >= 3000
    logs = sorted(p.name for p in (tmp_path / "run" / "logs").iterdir())
    assert logs == ["actor-0.log", "actor-1.log", "learner-default.log"]
    assert list((tmp_path / "run" / "learner-default").glob("ckpt-*.pt")), "the learner checkpoints when stopped"


def titles(procs: list[psutil.Process]) -> set[str]:
    """What `ps` shows as each process's command line."""
    shown = set()
    for p in procs:
        try:
            shown.add(" ".join(p.cmdline()).strip())
        except psutil.NoSuchProcess:
            pass
    return shown


def test_sigterm_stops_every_child_and_exits_130(tmp_path):
    # an evaluation target it cannot reach: Double DQN now solves CartPole in as little as 3.4 s, before the SIGTERM
    proc = up(tmp_path, "stop.seconds=120", "stop.eval_return=1e9")
    daemons = {"tandem-learner-default", "tandem-actor-0", "tandem-evaluator"}  # the example has one actor
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not daemons <= titles(descendants(proc.pid)):  # ps shows each whole name
        time.sleep(0.2)
    time.sleep(3)  # let them get going
    children = descendants(proc.pid)
    assert daemons <= titles(children), titles(children)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = finish(proc, 30)
    assert proc.returncode == ExitCode.INTERRUPTED, err[-3000:]
    assert time.monotonic() - started < 15
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"orphans left behind: {[(p.pid, p.name()) for p in alive]}"
    assert json.loads(out.strip().splitlines()[-1])["reason"] == "stopped by SIGTERM"


def test_sigkilled_up_leaves_no_daemon_training_headless(tmp_path):
    """SIGKILL gives `tandem up` no chance to stop its children: they must notice and end by themselves."""
    proc = up(tmp_path, "stop.seconds=120", "eval.enabled=false")
    daemons = {"tandem-learner-default", "tandem-actor-0"}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not daemons <= titles(descendants(proc.pid)):
            time.sleep(0.2)
        children = descendants(proc.pid)  # the daemons, the forkserver and multiprocessing's resource tracker
        assert daemons <= titles(children), titles(children)
        proc.kill()
        proc.wait(10)
        gone, alive = psutil.wait_procs(children, timeout=20)
        assert not alive, f"left running after SIGKILL of tandem up: {sorted(titles(alive))}"
    finally:
        kill_session(proc)  # whatever is left of its session, test failed or not
        proc.communicate(timeout=10)


def test_a_second_run_in_the_same_run_dir_is_refused_and_leaves_the_first_alone(tmp_path):
    first = up(tmp_path, "stop.seconds=120", "eval.enabled=false")
    endpoint = tmp_path / "run" / "endpoint"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not endpoint.exists():
            time.sleep(0.1)
        assert endpoint.exists(), "the first run never wrote its endpoint file"
        second = up(tmp_path, "stop.seconds=120", "eval.enabled=false")
        out, err = finish(second, 60)
        assert second.returncode == ExitCode.FAILURE, (out[-2000:], err[-2000:])
        assert "in use by another supervisor" in err and str(first.pid) in err, err[-2000:]
        assert first.poll() is None and endpoint.exists(), "the refused run must not touch the first one"
    finally:
        first.send_signal(signal.SIGTERM)
        finish(first, 30)
    assert first.returncode == ExitCode.INTERRUPTED


def curves(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_second_up_resumes_its_counters_and_fresh_starts_over_with_new_curves(tmp_path):
    run = tmp_path / "run"
    first = up(tmp_path, "stop.env_steps=2000", "eval.enabled=false")
    out, err = finish(first, 90)
    assert first.returncode == ExitCode.OK, err[-2000:]
    assert "resuming" not in err
    learner = run / "learner-default"
    (checkpoint,) = sorted(learner.glob("ckpt-*.pt"))[-1:]
    version = int(checkpoint.stem.split("-")[1])
    ended_at = curves(run)[-1]["env_steps"]

    # stop.env_steps counts the run's steps, the first start's included (so a bare 2000 would end at once)
    second = up(tmp_path, f"stop.env_steps={ended_at + 2000}", "eval.enabled=false")
    out, err = finish(second, 90)
    assert second.returncode == ExitCode.OK, err[-2000:]
    assert f"resuming run 'cartpole' (default from version {version};" in err and "--fresh" in err, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["segment"] == 2 and summary["env_steps"] >= ended_at + 2000
    records = curves(run)
    assert [r["segment"] for r in records] == sorted(r["segment"] for r in records) and records[-1]["segment"] == 2
    steps = [r["env_steps"] for r in records]
    assert steps == sorted(steps), "env steps go on across the resume, never back to 0"
    assert next(r for r in records if r["segment"] == 2)["env_steps"] == ended_at

    newest = max(int(p.stem.split("-")[1]) for p in learner.glob("ckpt-*.pt"))
    third = up(tmp_path, "stop.env_steps=2000", "eval.enabled=false", fresh=True)
    out, err = finish(third, 90)
    assert third.returncode == ExitCode.OK, err[-2000:]
    assert "resuming" not in err and "fresh" in err, err[-2000:]
    (moved,) = (run / "previous").iterdir()
    assert max(int(p.stem.split("-")[1]) for p in (moved / "learner-default").glob("ckpt-*.pt")) == newest
    # the fresh learner found nothing to resume: only the second start's learner said it resumed (comparing
    # version numbers is not enough: a resumed DQN refills its replay first, so it may publish fewer versions)
    assert (run / "logs" / "learner-default.log").read_text().count("resumed from checkpoint") == 1
    # and its curves are its own: the earlier two starts' went aside with their checkpoints
    assert curves(moved) == records
    fresh = curves(run)
    assert {r["segment"] for r in fresh} == {1} and fresh[0]["env_steps"] < 2000 <= fresh[-1]["env_steps"]


def test_a_daemon_that_cannot_start_ends_the_run_with_its_error(tmp_path):
    # --no-probe: `tandem up` would refuse the config itself (tests/system/test_setup_mistakes.py)
    proc = up(tmp_path, "env.id=NoSuchEnv-v9", "stop.seconds=60", "supervisor.backoff_initial_s=0.1", probe=False)
    out, err = finish(proc, 60)
    assert proc.returncode == ExitCode.FAILURE
    summary = json.loads(out.strip().splitlines()[-1])
    # The learner (which builds one env to learn the spaces) and every actor fail the same way, each retried
    # with backoff; whichever goes FATAL first ends the run, and the reason names it and the env's error.
    reason = summary["reason"]
    assert ("learner-default is FATAL" in reason or "every actor is FATAL" in reason) and "NoSuchEnv-v9" in reason, (
        summary
    )
