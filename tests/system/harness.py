"""Real daemons as subprocesses on loopback, and a control socket that collects their heartbeats."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tandem.client.harness import end_all, kill_session, start_session, up_command
from tandem.daemons.config import RunConfig, load_config, render_toml
from tandem.daemons.supervisor.collector import HeartbeatCollector
from tandem.daemons.supervisor.ports import fix_ports

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, overrides: list[str], base: str = "examples/cartpole.toml") -> tuple[RunConfig, Path]:
    """A resolved config with free ports and its run directory inside `tmp_path`."""
    config = fix_ports(load_config(ROOT / base, [f"run.dir='{tmp_path}/run'", *overrides]))
    path = tmp_path / "config.toml"
    path.write_text(render_toml(config))
    return config, path


class Collector(HeartbeatCollector):
    """The shared heartbeat collector, with waits that report the last heartbeats and dead daemons."""

    def counter(self, name: str, key: str, default=-1):
        return super().counter(name, key, default)

    def counters(self, name: str) -> dict:
        """Every counter of `name`'s last heartbeat (empty before its first)."""
        beat = self.last(name)
        return dict(beat.counters) if beat else {}

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float, what: str, procs: Procs | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.pump()
            if predicate():
                return
            if procs is not None:
                procs.check_alive()
        raise AssertionError(
            f"timed out after {timeout_s:g} s waiting for {what}; last heartbeats: "
            f"{ {n: (b.stage, dict(b.counters)) for n, b in self.beats.items()} }"
        )


class Procs:
    """Starts `tandem ...` daemons as real processes; `stop_all()` (run by the fixture) ends every one."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.expected_dead: set[str] = set()

    def start(self, name: str, *args: str, env: dict[str, str | None] | None = None) -> subprocess.Popen:
        """`tandem ARGS...` as process `name`; `env` adds to (or, with None values, removes from) the environment."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = (self.log_dir / f"{name}.log").open("ab")
        extra = env or {}
        env = {k: v for k, v in {**os.environ, "PYTHONUNBUFFERED": "1", **extra}.items() if v is not None}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tandem", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
        )
        log.close()
        self.procs[name] = proc
        self.expected_dead.discard(name)
        return proc

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if name not in self.expected_dead and proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log(name)[-3000:]}")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        self.expected_dead.add(name)
        self.procs[name].send_signal(sig)
        self.procs[name].wait(timeout=10)

    def stop_all(self, timeout_s: float = 10.0) -> dict[str, int | None]:
        end_all(self.procs.values(), timeout_s)
        return {name: proc.returncode for name, proc in self.procs.items()}


# ---------------------------------------------------------------- `tandem up` as a user runs it


def up(
    tmp_path, *overrides: str, example: str = "cartpole.toml", fresh: bool = False, probe: bool = True
) -> subprocess.Popen:
    """`tandem up` of an example until it ends by itself; read its JSON summary with `finish`. `probe=False`:
    --no-probe, so that the daemons themselves meet a mistake the config check would refuse."""
    args = up_command(
        ROOT / "examples" / example,
        [f"run.dir='{tmp_path}/run'", "supervisor.heartbeat_interval_s=0.2", *overrides],
        (["--fresh"] if fresh else []) + ([] if probe else ["--no-probe"]),
    )
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True
    )


def join_learner(
    tmp_path: Path, control: str, bind: str, log_name: str, *flags: str, wrap: Sequence[str] = ()
) -> subprocess.Popen:
    """`tandem learner` of the run in `tmp_path` joining it at `control`, bound to `bind`, as a learner started on
    another host joins: in a session of its own (`wrap` prefixes the command), its output in `tmp_path/log_name`."""
    config = str(tmp_path / "run" / "config.toml")
    with (tmp_path / log_name).open("ab") as log:
        return start_session(
            [*wrap, sys.executable, "-m", "tandem", "learner", config, "--join", control, "--bind", bind, *flags],
            log,
            ROOT,
        )


def finish(proc: subprocess.Popen, timeout_s: float) -> tuple[str, str]:
    """Wait for `tandem up` to end by itself: its stdout and stderr. Past `timeout_s`, kill its session and fail."""
    try:
        return proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"tandem up did not finish in {timeout_s} s:\n{out[-2000:]}\n{err[-2000:]}") from None
