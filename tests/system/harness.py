"""Real daemons as subprocesses on loopback, and a control socket that collects their heartbeats."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from client.up import fix_ports
from daemons.config import RunConfig, load_config, render_toml
from protocol import ControlReply, ControlRequest, Heartbeat, ProtocolError, decode, sockets

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, overrides: list[str], base: str = "examples/cartpole.toml") -> tuple[RunConfig, Path]:
    """A resolved config with free ports and its run directory inside `tmp_path`."""
    config = fix_ports(load_config(ROOT / base, [f"run.dir='{tmp_path}/run'", *overrides]))
    path = tmp_path / "config.toml"
    path.write_text(render_toml(config))
    return config, path


class Collector:
    """Binds a control ROUTER like the supervisor's and keeps the latest heartbeat of every daemon."""

    def __init__(self):
        self.ctx = sockets.new_context()
        self.router = sockets.control_router(self.ctx, "tcp://127.0.0.1:*")
        self.endpoint = sockets.bound_endpoint(self.router)
        self.beats: dict[str, Heartbeat] = {}
        self.history: dict[str, list[Heartbeat]] = {}
        self.episode_returns: list[float] = []

    def pump(self, timeout_ms: int = 50) -> None:
        if not sockets.poll([self.router], timeout_ms):
            return
        while (frames := sockets.recv_frames(self.router, 0)) is not None:
            try:
                message = decode(frames[1:])
            except ProtocolError:
                continue
            if isinstance(message, Heartbeat):
                self.beats[message.name] = message
                self.history.setdefault(message.name, []).append(message)
            elif isinstance(message, ControlRequest):
                if message.command == "episodes":
                    self.episode_returns.extend(message.args.get("returns", []))
                if message.command in ("episodes", "register", "start_token"):
                    reply = ControlReply(message.request_id, True, data={"granted": True})
                else:  # like a control endpoint without a registry: daemons fall back to the config's addresses
                    reply = ControlReply(message.request_id, False, "unknown_command", message.command)
                sockets.send_message(self.router, reply, identity=bytes(frames[0]))

    def counter(self, name: str, key: str, default=-1):
        beat = self.beats.get(name)
        return beat.counters.get(key, default) if beat else default

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float, what: str, procs: Procs | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.pump()
            if predicate():
                return
            if procs is not None:
                procs.check_alive()
        raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; last heartbeats: "
                             f"{ {n: (b.stage, dict(b.counters)) for n, b in self.beats.items()} }")

    def close(self) -> None:
        sockets.close_context(self.ctx, linger_ms=0)


class Procs:
    """Starts `tandem ...` daemons as real processes; `stop_all()` (run by the fixture) ends every one."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.expected_dead: set[str] = set()

    def start(self, name: str, *args: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = (self.log_dir / f"{name}.log").open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "client", *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
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
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        return {name: proc.returncode for name, proc in self.procs.items()}
