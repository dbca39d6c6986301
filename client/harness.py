"""A real `tandem up` run driven from Python: started, watched through its control socket, ended.

The one harness behind the fault drills (`tandem chaos`), the benchmarks (`tandem bench`) and the system
tests: each used to start and stop runs its own way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

import psutil

from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.protocol import sockets

START_S = 60.0  # from `tandem up` to its endpoint file; a loaded machine imports slowly
CLOSE_GRACE_S = 30.0


class RunFailed(RuntimeError):
    """The run ended, or never reached what the caller waited for: the message says what it was doing."""


def up_command(
    config: str | Path, overrides: Sequence[str] = (), flags: Sequence[str] = (), as_json: bool = True
) -> list[str]:
    """`tandem up CONFIG [--json] FLAGS --set ...` run by this Python (no PATH needed): how every test, benchmark
    and drill starts a run."""
    args = [sys.executable, "-m", "tandem", "up", str(config), *(["--json"] if as_json else []), *flags]
    for item in overrides:
        args += ["--set", item]
    return args


def start_session(args: Sequence[str], out: IO, cwd: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`args` in a session of their own (so that one killpg ends all they start), stdout and stderr to `out`, no
    stdin, Python unbuffered; `env` adds to this process's environment."""
    return subprocess.Popen(
        list(args),
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,
    )


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL whatever is left of the session `proc` leads (it was started with start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def end_session(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM `proc` (started with start_new_session), then SIGKILL whatever of its session is left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    kill_session(proc)  # anything of its session still there
    if proc.poll() is None:
        proc.wait(timeout=10)


def end_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM every process of the session `proc` leads at once, SIGKILL them all if `proc` has not exited after
    `grace_s`. Unlike end_session, what outlives a clean exit is left for the caller to find (a test of orphans)."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        proc.wait(timeout=10)


def end_all(procs: Iterable[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM each of `procs` at once, SIGKILL each one not exited `grace_s` later (processes, not sessions)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def rows(data: dict) -> dict[str, dict]:
    """`tandem status` data: the process rows by name."""
    return {r["name"]: r for r in data["processes"]}


def all_running(data: dict) -> bool:
    return all(r["state"] == "RUNNING" for r in data["processes"])


def running(name: str) -> Callable[[dict], bool]:
    return lambda d: rows(d)[name]["state"] == "RUNNING"


def replaced(name: str, old_pid: int) -> Callable[[dict], bool]:
    """True once `name` runs again under a pid other than `old_pid`."""
    return lambda d: rows(d)[name]["state"] == "RUNNING" and rows(d)[name]["pid"] != old_pid


def updates(data: dict) -> int:
    return data["policies"][0]["updates"] or 0


def tree(pid: int) -> list[psutil.Process]:
    """`pid` and every process below it (those that exist now)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below `pid` (those that exist now; none once `pid` is gone)."""
    return tree(pid)[1:]


def live(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class UpRun:
    """A `tandem up` process in its own session, its output in `out_path`, and a control channel to it.

    `wrap` prefixes the command (e.g. `unshare -m sh -c 'mount ... && exec "$@"' sh`); the run dir is then read
    through /proc/PID/root, so it may live in a mount only that process sees.
    """

    def __init__(
        self,
        config: str | Path,
        run_dir: Path,
        out_path: Path,
        overrides: Sequence[str] = (),
        flags: Sequence[str] = (),
        wrap: Sequence[str] = (),
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.run_dir, self.out_path = run_dir, out_path
        self.out = out_path.open("w")
        self.proc = start_session([*wrap, *up_command(config, overrides, flags)], self.out, cwd or out_path.parent, env)
        self.ctx = sockets.new_context()
        self.channel: ControlChannel | None = None
        endpoint = self.path("endpoint")
        deadline = time.monotonic() + START_S
        while not read_or_empty(endpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RunFailed(f"tandem up never wrote its endpoint file: {self.output()[-2000:]}")
            time.sleep(0.05)
        self.endpoint = read_or_empty(endpoint)
        self.channel = ControlChannel(self.ctx, self.endpoint)

    def path(self, *parts: str) -> Path:
        """A path in the run dir as this process sees it (through its mount namespace while it lives)."""
        inside = self.run_dir.joinpath(*parts)
        return Path(f"/proc/{self.proc.pid}/root{inside}") if self.proc.poll() is None else inside

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def status(self) -> dict:
        return self.channel.request("status", timeout_s=5).data

    def row(self, name: str) -> dict:
        return rows(self.status())[name]

    def wait(self, predicate: Callable[[dict], bool], timeout_s: float, what: str) -> dict:
        """Poll `tandem status` until `predicate(data)`; RunFailed if the run exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        data: dict = {"processes": []}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RunFailed(
                    f"tandem up exited ({self.proc.returncode}) waiting for {what}: {self.output()[-2000:]}"
                )
            try:
                data = self.status()
            except ControlTimeout:  # a loaded machine can starve the supervisor for a while; the deadline decides
                continue
            if predicate(data):
                return data
            time.sleep(0.1)
        raise RunFailed(
            f"timed out after {timeout_s:g} s waiting for {what}: "
            f"{[(r['name'], r['state'], r['stage'], r['last_error'][-200:]) for r in data['processes']]}"
        )

    def end(self, how: str, timeout_s: float = 60.0) -> tuple[int | None, float]:
        """End the run by 'SIGTERM', 'SIGINT' or 'stop' (`tandem stop`); its exit code and seconds to exit."""
        started = time.monotonic()
        if how == "stop":
            subprocess.run(
                [sys.executable, "-m", "tandem", "stop", "--endpoint", self.endpoint], capture_output=True, timeout=30
            )
        else:
            self.proc.send_signal(getattr(signal, how))
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, time.monotonic() - started
        return self.proc.returncode, time.monotonic() - started

    def close(self) -> None:
        """End whatever is left: SIGTERM, then SIGKILL of the whole session after CLOSE_GRACE_S."""
        if self.channel is not None:
            self.channel.close()
        sockets.close_context(self.ctx, 0)
        end_session(self.proc, CLOSE_GRACE_S)
        self.out.close()


def read_or_empty(path: Path) -> str:
    """The stripped text of `path`, or "" while it does not exist (yet, or any more)."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""
