"""A whole `tandem up` run of fixed length for a benchmark: its summary, its learner's metrics, its CPU use."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click
import psutil

from tandem.client.harness import end_group, up_command

CPU_SAMPLE_S = 1.0
READY_ALLOWANCE_S = 180.0  # longest a run measured from `ready` may take to get there (imports, env builds, a group)


@dataclass
class RunFigures:
    summary: dict
    learner_rows: list[dict]  # learner-default/metrics.jsonl, one row a second
    cpu_percent: list[float] = field(default_factory=list)  # whole process tree, 100 = one core busy
    gpu_percent: list[float] = field(default_factory=list)  # nvidia-smi utilization, where there is one
    eval_curve: list[tuple[float, int, float]] = field(default_factory=list)  # (seconds, env steps, eval return)
    rows: list[dict] = field(default_factory=list)  # the run's curves (run.dir/metrics.jsonl), one row a second
    started_unix: float = 0.0  # when `tandem up` was launched


def learner_rows(run_dir: Path) -> list[dict]:
    return json_rows(run_dir / "learner-default" / "metrics.jsonl")


def json_rows(path: Path) -> list[dict]:
    """The JSON objects of a .jsonl file, one a line; a line cut short (a writer stopped mid-line) is skipped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def tree_cpu(root: psutil.Process, known: dict[int, psutil.Process]) -> float:
    """CPU % of `root` and its descendants since the last call (processes seen before keep their baseline)."""
    total = 0.0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for proc in procs:
        tracked = known.setdefault(proc.pid, proc)
        try:
            total += tracked.cpu_percent(None)
        except psutil.NoSuchProcess:
            known.pop(proc.pid, None)
    return total


def gpu_utilisation() -> float | None:
    """The first GPU's utilisation in percent from nvidia-smi, or None without one (or when it hangs)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
        return float(out.split()[0])
    except (subprocess.TimeoutExpired, OSError, ValueError, IndexError):
        return None


def timed_run(
    config: Path,
    seconds: float,
    overrides: tuple[str, ...] | list[str],
    keep_dir: Path | None = None,
    ready: Callable[[Path], bool] | None = None,
    flags: tuple[str, ...] = (),
    companions: Callable[[Path], list[subprocess.Popen]] | None = None,
) -> RunFigures:
    """`tandem up config` for `seconds` (its own stop conditions may end it sooner), sampled once a second.

    The run directory is temporary unless `keep_dir` is given (it is then the run directory, curves and
    checkpoints kept). Its output goes to a file, not a pipe: a pipe nobody reads during an hour-long run
    fills and stops the supervisor at its next progress line. With `ready` (a test of the run directory),
    the `seconds` count from the first sample at which it holds, and the bench then stops the run with
    `tandem stop`: a start slowed by a loaded machine then eats into no measurement. A run that never gets
    ready ends at its own stop.seconds, READY_ALLOWANCE_S later than `seconds`. `companions`, given the run
    directory once the supervisor has written its endpoint there, starts processes that join the run (learners
    started by hand elsewhere); they are ended with it."""
    with tempfile.TemporaryDirectory(prefix="tandem-bench-") as tmp:
        run_path = keep_dir if keep_dir is not None else Path(tmp) / "run"
        ceiling = seconds if ready is None else seconds + READY_ALLOWANCE_S
        args = up_command(config, [f"run.dir='{run_path}'", f"stop.seconds={ceiling}", *overrides], flags)
        joined: list[subprocess.Popen] | None = None if companions is not None else []
        started_unix = time.time()
        with open(Path(tmp) / "out.jsonl", "w+") as out_file, open(Path(tmp) / "err.txt", "w+") as err_file:
            proc = subprocess.Popen(args, stdout=out_file, stderr=err_file, text=True)
            root, known, cpu, gpu = psutil.Process(proc.pid), {}, [], []
            deadline = time.monotonic() + ceiling + 120
            ready_at = None  # when `ready` first held
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(CPU_SAMPLE_S)
                if joined is None and companions is not None and (run_path / "endpoint").is_file():
                    joined = companions(run_path)
                cpu.append(tree_cpu(root, known))
                if (busy := gpu_utilisation()) is not None:
                    gpu.append(busy)
                if ready is None:
                    continue
                if ready_at is None and ready(run_path):
                    ready_at = time.monotonic()
                elif ready_at is not None and time.monotonic() - ready_at >= seconds:
                    stop_run(run_path)
                    ready = None  # asked once: the run winds down from here, or ends at its stop.seconds
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            for companion in joined or []:
                end_group(companion, 15.0)
            out_file.seek(0)
            err_file.seek(0)
            out, err = out_file.read(), err_file.read()
        rows = learner_rows(run_path)
        curves = json_rows(run_path / "metrics.jsonl")
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise click.ClickException(f"`tandem up {config.name}` failed ({proc.returncode}): {err.strip()[-500:]}")
    curve = [
        (line["elapsed_s"], line["env_steps"], line["eval_return"])
        for line in lines
        if line.get("eval_return") is not None and "elapsed_s" in line
    ]
    return RunFigures(
        summary=lines[-1],
        learner_rows=rows,
        cpu_percent=cpu[1:],
        gpu_percent=gpu,
        eval_curve=curve,
        rows=curves,
        started_unix=started_unix,
    )


def stop_run(run_path: Path) -> None:
    """`tandem stop` the run in `run_path` (`tandem up` then exits 0); if that fails, its stop.seconds ends it."""
    try:
        subprocess.run(
            [sys.executable, "-m", "tandem", "stop", "--run-dir", str(run_path)],
            capture_output=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pass
