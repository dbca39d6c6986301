"""deploy/slurm for real: a single-node Slurm started here runs the learner job and an actor job array, which
find each other through the supervisor and train. Skipped, with the reason, where Slurm cannot start."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tandem.client.harness import end_group, end_session, start_session
from tandem.daemons.runtime.control_channel import ControlChannel, ControlTimeout
from tandem.protocol import sockets
from tests.system.harness import ROOT, write_config

SLURM_START_S = 30.0
TRAIN_S = 150.0
BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def free_ports(count: int) -> int:
    """The first of `count` consecutive free TCP ports on 127.0.0.1 (the learner binds PORT, PORT+1, PORT+2)."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - count)
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no run of free ports found")


def wait_until(predicate, timeout_s: float, interval_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return False


class SlurmNode:
    """munged, slurmctld and slurmd of a one-node cluster, all in one temporary directory, ended by `stop`."""

    def __init__(self, root: Path):
        self.root, self.procs = root, []
        (root / "state").mkdir()
        (root / "spool").mkdir()
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> str | None:
        """None when the node is up and idle, else why it could not start."""
        r = self.root
        made = subprocess.run(
            ["mungekey", "--create", f"--keyfile={r}/munge.key"], capture_output=True, text=True, timeout=30
        )
        if made.returncode != 0:
            return f"mungekey failed: {made.stderr.strip()}"
        self._spawn(
            "munged",
            [
                "munged",
                "--force",
                "--foreground",
                f"--socket={r}/munge.sock",
                f"--key-file={r}/munge.key",
                f"--log-file={r}/munged.log",
                f"--pid-file={r}/munged.pid",
                f"--seed-file={r}/munged.seed",
            ],
        )
        if not wait_until(lambda: (r / "munge.sock").exists(), 10):
            return f"munged did not start: {self._tail('munged')}"
        ctld, slurmd = free_ports(1), free_ports(1)
        host = socket.gethostname()
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=tandemtest",
                    f"SlurmctldHost={host}(127.0.0.1)",
                    f"SlurmctldPort={ctld}",
                    f"SlurmdPort={slurmd}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={r}/munge.sock",
                    "CredType=cred/munge",
                    f"StateSaveLocation={r}/state",
                    f"SlurmdSpoolDir={r}/spool",
                    f"SlurmctldPidFile={r}/slurmctld.pid",
                    f"SlurmdPidFile={r}/slurmd.pid",
                    f"SlurmctldLogFile={r}/slurmctld.log",
                    f"SlurmdLogFile={r}/slurmd.log",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SchedulerType=sched/builtin",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "JobCompType=jobcomp/none",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "KillWait=5",
                    f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 2} RealMemory=4000 State=UNKNOWN",
                    # Jobs share the cores: the learner and two actors are more tasks than this machine has cores.
                    "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8",
                    "",
                ]
            )
        )
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])

        def idle() -> bool:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=self.env, timeout=10)
            return out.stdout.strip() == "idle"

        if not wait_until(idle, SLURM_START_S, 0.5):
            return f"the node never became idle: {self._tail('slurmctld')} {self._tail('slurmd')}"
        return None

    def _spawn(self, name: str, args: list[str]) -> None:
        out = (self.root / f"{name}.out").open("w")
        self.procs.append(
            subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        )

    def _tail(self, name: str) -> str:
        text = ""
        for suffix in (".out", ".log"):
            path = self.root / f"{name}{suffix}"
            if path.exists():
                text += path.read_text()[-400:]
        return text.strip()

    def sbatch(self, *args: str, env: dict[str, str]) -> str:
        done = subprocess.run(
            ["sbatch", "--parsable", *args], capture_output=True, text=True, env={**self.env, **env}, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def queue(self) -> str:
        return subprocess.run(
            ["squeue", "-h", "-o", "%i %T %j"], capture_output=True, text=True, env=self.env, timeout=10
        ).stdout

    def stop(self) -> None:
        subprocess.run(["scancel", "--user=root"], capture_output=True, env=self.env, timeout=30)
        wait_until(lambda: not self.queue().strip(), 30, 0.5)
        for proc in reversed(self.procs):
            end_group(proc, 10)


@pytest.fixture
def slurm_node():
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(
            f"Slurm is not installed here (missing {', '.join(missing)}; Debian: apt-get install slurmctld "
            "slurmd slurm-client munge)"
        )
    if os.geteuid() != 0:
        pytest.skip("starting slurmctld and slurmd for a test needs root")
    with tempfile.TemporaryDirectory(prefix="tdm-slurm-", dir="/tmp") as directory:  # munge's socket path stays short
        node = SlurmNode(Path(directory))
        try:
            why = node.start()
            if why is not None:
                pytest.skip(f"Slurm could not start here: {why}")
            yield node
        finally:
            node.stop()


def test_the_sbatch_scripts_run_a_learner_and_an_actor_array_that_train(tmp_path, slurm_node):
    config, config_path = write_config(
        tmp_path,
        [
            "actors.count=2",
            "transport.host='127.0.0.1'",
            "eval.enabled=false",
            "learner.replay_min_size=200",
            "stop.seconds=600",
        ],
    )
    control = f"tcp://127.0.0.1:{config.transport.control_port}"
    supervisor_log = (tmp_path / "supervisor.log").open("w")
    supervisor = start_session(
        [sys.executable, "-m", "tandem", "supervise", str(config_path), "--no-children"],
        supervisor_log,
        tmp_path,
        {"PYTHONPATH": str(ROOT)},
    )
    ctx = sockets.new_context()
    channel = ControlChannel(ctx, control)
    pids: set[int] = set()
    try:
        # The jobs find `tandem` on the PATH they were submitted with (--export=ALL, as deploy/README.md shows).
        job_env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "TANDEM_CONFIG": str(config_path),
            "TANDEM_CONTROL": control,
            "LEARNER_ADDR": "127.0.0.1",
            "LEARNER_PORT": str(free_ports(3)),
            "DEVICE": "cpu",
            "OMP_NUM_THREADS": "1",
        }
        # Command-line options override the scripts' #SBATCH lines: no GPU and less memory on this machine.
        for script, options in (
            ("learner.sbatch", ["--gres=none", "--mem=1500M", f"--output={tmp_path}/learner-%j.out"]),
            ("actors.sbatch", ["--array=0-1", "--mem=1000M", f"--output={tmp_path}/actor-%a.out"]),
        ):
            slurm_node.sbatch(*options, "--cpus-per-task=1", str(ROOT / "deploy" / "slurm" / script), env=job_env)

        def status() -> dict:
            try:
                return channel.request("status", timeout_s=5).data
            except ControlTimeout:
                return {"processes": [], "policies": []}

        deadline, data = time.monotonic() + TRAIN_S, {"processes": [], "policies": []}
        while time.monotonic() < deadline:
            assert supervisor.poll() is None, (tmp_path / "supervisor.log").read_text()[-2000:]
            data = status()
            pids |= {r["pid"] for r in data["processes"] if r.get("pid")}
            rows = {r["name"]: r for r in data["processes"]}
            updates = max([p.get("updates") or 0 for p in data["policies"]], default=0)
            if updates > 0 and all(rows.get(f"actor-{i}", {}).get("rate_per_s") for i in range(2)):
                break
            time.sleep(1)
        else:
            logs = {p.name: p.read_text()[-600:] for p in tmp_path.glob("*.out")}
            raise AssertionError(
                f"no training within {TRAIN_S} s: queue {slurm_node.queue()!r}, "
                f"status {[(r['name'], r['state'], r['stage']) for r in data['processes']]}, logs {logs}"
            )
        rows = {r["name"]: r for r in data["processes"]}
        assert {"learner-default", "actor-0", "actor-1"} <= set(rows)
        assert all(rows[name]["state"] == "REMOTE" for name in ("learner-default", "actor-0", "actor-1")), rows
    finally:
        channel.close()
        sockets.close_context(ctx, 0)
        slurm_node.stop()  # scancel: the jobs' daemons get SIGTERM (then SIGKILL after KillWait)
        end_session(supervisor, 30)
        supervisor_log.close()
    # Nothing the jobs started outlives them.
    left = [pid for pid in pids if pid != supervisor.pid and _alive(pid)]
    assert not left, f"processes of the cancelled jobs still running: {left}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_slurm_replicas_job_is_valid_bash():
    script = ROOT / "deploy" / "slurm" / "learner-replicas.sbatch"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=10).returncode == 0
    assert '--rank "$SLURM_PROCID"' in script.read_text()
