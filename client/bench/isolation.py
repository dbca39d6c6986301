"""`tandem bench isolation`: one actor's env steps/s beside an idle learner and beside one training flat out."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from client.up import fix_ports
from daemons.config import load_config, render_toml
from protocol import (
    ControlReply,
    ControlRequest,
    Heartbeat,
    ProtocolError,
    decode,
    sockets,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = ["actors.count=1", "eval.enabled=false", "supervisor.heartbeat_interval_s=0.25", "stop.seconds=3600.0"]
# (a) the learner only receives: training needs a full 2M ring (about 2M x 2 obs x 16 B, well within memory).
IDLE = ["learner.replay_capacity=2000000", "learner.replay_min_size=2000000"]
# (b) the learner trains as fast as it can: 64 samples per insert keeps it always behind, so CPU-bound.
TRAINING = ["learner.samples_per_insert=64.0"]


class Beats:
    """A control ROUTER like the supervisor's: keeps (arrival time, heartbeat) per daemon, grants what is asked."""

    def __init__(self):
        self.ctx = sockets.new_context()
        self.router = sockets.control_router(self.ctx, "tcp://127.0.0.1:*")
        self.endpoint = sockets.bound_endpoint(self.router)
        self.history: dict[str, list[tuple[float, Heartbeat]]] = {}

    def pump(self, timeout_ms: int = 50) -> None:
        if not sockets.poll([self.router], timeout_ms):
            return
        while (frames := sockets.recv_frames(self.router, 0)) is not None:
            try:
                message = decode(frames[1:])
            except ProtocolError:
                continue
            if isinstance(message, Heartbeat):
                self.history.setdefault(message.name, []).append((time.monotonic(), message))
            elif isinstance(message, ControlRequest):
                ok = message.command in ("episodes", "register", "start_token")
                reply = ControlReply(message.request_id, True, data={"granted": True}) if ok else \
                    ControlReply(message.request_id, False, "unknown_command", message.command)
                sockets.send_message(self.router, reply, identity=bytes(frames[0]))

    def last(self, name: str) -> Heartbeat | None:
        return self.history[name][-1][1] if self.history.get(name) else None

    def counter(self, name: str, key: str) -> float:
        beat = self.last(name)
        return beat.counters.get(key, 0) if beat else 0

    def rate(self, name: str, key: str, since: float) -> float:
        """Counter growth per second between the first and the last heartbeat that arrived after `since`."""
        window = [(t, b.counters.get(key, 0)) for t, b in self.history.get(name, []) if t >= since]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return 0.0
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])

    def close(self) -> None:
        sockets.close_context(self.ctx, linger_ms=0)


def wait_until(beats: Beats, procs: dict[str, subprocess.Popen], predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        beats.pump()
        if predicate():
            return
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise click.ClickException(f"{name} exited with {proc.returncode} while waiting for {what}")
    raise click.ClickException(f"timed out after {timeout_s:g} s waiting for {what}")


def stop(procs: dict[str, subprocess.Popen], timeout_s: float = 10.0) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def run_phase(training: bool, seconds: float) -> dict:
    """Start a learner and one actor, wait until both work, then measure over `seconds`."""
    with tempfile.TemporaryDirectory(prefix="tandem-isolation-") as tmp:
        overrides = [f"run.dir='{tmp}/run'", *BASE, *(TRAINING if training else IDLE)]
        path = Path(tmp) / "config.toml"
        path.write_text(render_toml(fix_ports(load_config(ROOT / "examples" / "cartpole.toml", overrides))))
        beats, procs = Beats(), {}
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            for name, args in (("learner", ("learner", str(path))), ("actor", ("actor", str(path), "--index", "0"))):
                with (Path(tmp) / f"{name}.log").open("ab") as log:
                    procs[name] = subprocess.Popen([sys.executable, "-m", "client", *args, "--control", beats.endpoint],
                                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                   cwd=ROOT, env=env)
            running = lambda n: (b := beats.last(n)) is not None and b.stage == "running"
            wait_until(beats, procs, lambda: running("actor-0") and running("learner-default"), 120, "both running")
            if training:
                wait_until(beats, procs, lambda: beats.counter("learner-default", "updates") > 0, 120, "learner updates")
            start = time.monotonic()
            wait_until(beats, procs, lambda: time.monotonic() - start >= seconds, seconds + 5, "the window")
            return {"steps_per_s": beats.rate("actor-0", "env_steps", start),
                    "updates_per_s": beats.rate("learner-default", "updates", start),
                    "updates": beats.counter("learner-default", "updates")}
        finally:
            stop(procs)
            beats.close()


@click.command("isolation")
@click.option("--seconds", default=10.0, show_default=True, help="Measuring window of each phase (--quick: 3).")
@click.option("--repeats", default=3, show_default=True, help="Fresh processes per phase; medians are reported (--quick: 1).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record.")
@click.option("--quick", is_flag=True, help="One 3 s window per phase (a smoke run, not a figure to quote).")
def isolation_cmd(seconds: float, repeats: int, as_json: bool, quick: bool) -> None:
    """One actor's env steps/s with its learner training flat out, as a fraction of that with the learner idle."""
    if quick:
        seconds, repeats = 3.0, 1
    idle, busy = [], []
    for r in range(repeats):
        idle.append(run_phase(False, seconds))
        busy.append(run_phase(True, seconds))
        if idle[-1]["updates"] > 0:
            raise click.ClickException("the idle learner trained: its replay filled within the window")
        if not as_json:
            click.echo(f"repeat {r}: idle {idle[-1]['steps_per_s']:9.0f} steps/s   training {busy[-1]['steps_per_s']:9.0f} "
                       f"steps/s   learner {busy[-1]['updates_per_s']:7.1f} updates/s")
    idle_rate = statistics.median(p["steps_per_s"] for p in idle)
    busy_rate = statistics.median(p["steps_per_s"] for p in busy)
    ratio = busy_rate / idle_rate if idle_rate > 0 else 0.0
    record = {"benchmark": "isolation", "quick": quick, "machine": {"cpu_count": os.cpu_count()},
              "idle_steps_per_s": round(idle_rate, 1), "training_steps_per_s": round(busy_rate, 1),
              "learner_updates_per_s": round(statistics.median(p["updates_per_s"] for p in busy), 1),
              "ratio": round(ratio, 3), "target": {"ratio_min": 0.9}, "met": ratio >= 0.9}
    if as_json:
        click.echo(json.dumps(record))
    else:
        click.echo(f"actor steps/s: idle learner {idle_rate:.0f}, training learner {busy_rate:.0f} "
                   f"({record['learner_updates_per_s']:g} updates/s) on {os.cpu_count()} CPUs; "
                   f"ratio {ratio:.3f} (target >= 0.9): {'met' if record['met'] else 'NOT met'}")
