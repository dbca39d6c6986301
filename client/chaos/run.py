"""A real `tandem up` run in a temp dir and a control channel to its supervisor (for the chaos drills and tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tandem.daemons.config import apply_overrides, config_from_dict, render_toml
from tandem.daemons.config.schema import RunConfig
from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.daemons.supervisor.ports import fix_ports
from tandem.protocol import sockets

# CartPole-v1 with Double DQN as examples/cartpole.toml has it (pinned: an installed package has no examples/),
# with fast heartbeats, short grace and backoff so that a drill sees a fault and its repair in seconds.
CARTPOLE = ["run.name='chaos'", "env.id='CartPole-v1'", "env.num_envs=8", "algorithm.batch_size=256",
            "algorithm.target_update_interval=100", "actors.count=1", "eval.enabled=false", "stop.seconds=3600.0"]
FAST = ["supervisor.heartbeat_interval_s=0.2", "supervisor.liveness_timeout_s=10.0", "supervisor.stop_grace_s=2.0",
        "supervisor.backoff_initial_s=0.2", "supervisor.backoff_max_s=1.0"]
START_S = 60.0  # from `tandem up` to its endpoint file; a loaded machine imports slowly


class RunFailed(RuntimeError):
    """The run ended, or never reached what a drill waited for: the message says what it was doing."""


def rows(data: dict) -> dict[str, dict]:
    return {r["name"]: r for r in data["processes"]}


def all_running(data: dict) -> bool:
    return all(r["state"] == "RUNNING" for r in data["processes"])


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


def live(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def write_config(tmp: Path, overrides: list[str]) -> tuple[RunConfig, Path]:
    """A resolved config with free ports fixed (so a drill knows the learner's), its run dir `tmp`/run."""
    config = fix_ports(config_from_dict(apply_overrides({}, [f"run.dir='{tmp}/run'", *CARTPOLE, *FAST, *overrides])))
    path = tmp / "config.toml"
    path.write_text(render_toml(config))
    return config, path


class Run:
    """A `tandem up` process in its own session and a control channel to its supervisor.

    `wrap` prefixes the command (e.g. `unshare -m sh -c 'mount ... && exec "$@"' sh`); the run dir is then read
    through /proc/PID/root, so it may live in a mount only that process sees.
    """

    def __init__(self, tmp: Path, overrides: list[str], wrap: tuple[str, ...] = (), config_path: Path | None = None):
        self.tmp = tmp
        self.config, path = write_config(tmp, overrides)
        if config_path is not None:  # the caller wants the config elsewhere (e.g. outside a mount it shadows)
            path = config_path
            path.write_text(render_toml(self.config))
        args = [*wrap, sys.executable, "-m", "tandem", "up", str(path), "--json"]
        self.out_path = tmp / "up.out"
        self.out = self.out_path.open("w")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=tmp, env=env, start_new_session=True)
        self.ctx = sockets.new_context()
        self.channel: ControlChannel | None = None
        endpoint = self.path("endpoint")
        deadline = time.monotonic() + START_S
        while not endpoint.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RunFailed(f"tandem up never wrote its endpoint file: {self.output()[-2000:]}")
            time.sleep(0.05)
        self.channel = ControlChannel(self.ctx, endpoint.read_text().strip())

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run.dir)

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
        deadline = time.monotonic() + timeout_s
        data = {"processes": []}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RunFailed(f"tandem up exited ({self.proc.returncode}) waiting for {what}: {self.output()[-2000:]}")
            try:
                data = self.status()
            except ControlTimeout:  # a loaded machine can starve the supervisor for a while; the deadline decides
                continue
            if predicate(data):
                return data
            time.sleep(0.1)
        raise RunFailed(f"timed out after {timeout_s:g} s waiting for {what}: "
                        f"{[(r['name'], r['state'], r['stage'], r['last_error'][-200:]) for r in data['processes']]}")

    def end(self, how: str, timeout_s: float = 60.0) -> tuple[int | None, float]:
        """End the run by 'SIGTERM', 'SIGINT' or 'stop' (`tandem stop`); its exit code and seconds to exit."""
        started = time.monotonic()
        if how == "stop":
            subprocess.run([sys.executable, "-m", "tandem", "stop", "--endpoint", self.channel.endpoint],
                           capture_output=True, timeout=30)
        else:
            self.proc.send_signal(getattr(signal, how))
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, time.monotonic() - started
        return self.proc.returncode, time.monotonic() - started

    def close(self) -> None:
        """End whatever is left: SIGTERM, then SIGKILL of the whole session after 30 s."""
        if self.channel is not None:
            self.channel.close()
        sockets.close_context(self.ctx, 0)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything of its session still there
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        self.out.close()
