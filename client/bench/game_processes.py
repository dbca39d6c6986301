"""`tandem bench game --processes`: a served run's config as its file has it, each game a process of its own."""

from __future__ import annotations

import multiprocessing
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tandem.client.bench.examples import example_config
from tandem.client.bench.game_drive import alone, echo, end_echo, play
from tandem.client.bench.game_phases import TARGET_FRAMES_PER_S, game_figures, median_phases, paired_median
from tandem.client.bench.report import target_lines
from tandem.client.harness import RunFailed, UpRun, rows, tree

DEFAULT_CONFIG = example_config("game_cartpole.toml")
WARM_UP_S = 120.0  # longest wait for the learner's first update (a loaded machine starts slowly)
if TYPE_CHECKING:
    from tandem.daemons.settings.schema import RunConfig

ROLES = {"actor": "server", "learner": "learner", "evaluator": "evaluator"}  # by a daemon's process title


def served_config(config: Path, run_dir: Path, seconds: float, overrides: tuple[str, ...]) -> RunConfig:
    """`config` as its file has it, but for where the run lives and when it stops.

    Its stop conditions go (the example stops once its evaluator's return reaches 475, seconds into the first
    phase: the measurement needs the learner training throughout), and stop.seconds only ends a run the bench
    left behind. Everything else stays, the learner's and the evaluator's settings included; `overrides`
    (the user's --set) come last."""
    from tandem.daemons.config import apply_overrides, config_from_dict

    data = tomllib.loads(config.read_text())
    data["stop"] = {"seconds": seconds}
    data.setdefault("run", {})["dir"] = str(run_dir)
    return config_from_dict(apply_overrides(data, list(overrides)))


def daemon_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds so far of a `tandem up`'s processes by role: server, learner, evaluator, supervisor (the rest)."""
    out = {"server": 0.0, "learner": 0.0, "evaluator": 0.0, "supervisor": 0.0}
    for proc in tree(pid):
        try:
            title, times = " ".join(proc.cmdline()), proc.cpu_times()
        except Exception:  # gone meanwhile (psutil.NoSuchProcess), or not ours to read
            continue
        role = next((r for key, r in ROLES.items() if title.startswith(f"tandem-{key}")), "supervisor")
        out[role] += times.user + times.system
    return out


def snapshot(run: UpRun) -> dict:
    """What a phase is measured between: the time, the daemons' CPU and their counters (as last reported)."""
    data = run.status()
    server = rows(data).get("actor-0", {}).get("counters", {})
    policy = data["policies"][0] if data.get("policies") else {}
    return {
        "at": time.monotonic(),
        "cpu_s": daemon_cpu_s(run.proc.pid),
        "requests": server.get("serve_requests") or 0,
        "inferences": server.get("serve_inferences") or 0,
        "updates": policy.get("updates") or 0,
        "dropped_by_learner": policy.get("dropped_by_learner") or 0,
        "dropped_by_actors": policy.get("dropped_by_actors") or 0,
        "eval_rounds": rows(data).get("evaluator", {}).get("counters", {}).get("eval_rounds") or 0,
    }


def process_phase(run: UpRun, endpoint: str, games: int, seconds: float, echoed: bool = False) -> dict:
    """`games` game processes for `seconds` (served, or against the echo): their figures, and meanwhile the
    server's mean batch, the learner's updates/s and drops, the evaluator's rounds and each role's cores."""
    marks: dict = {}
    results = play(endpoint, games, seconds, echoed, processes=True, started=lambda: marks.update(snapshot(run)))
    before, after = marks, snapshot(run)
    span = after["at"] - before["at"]
    requests, inferences = after["requests"] - before["requests"], after["inferences"] - before["inferences"]
    cores = {role: round((after["cpu_s"][role] - before["cpu_s"][role]) / span, 3) for role in after["cpu_s"]}
    return {
        **game_figures(results, games, seconds),
        "batch_mean": None if echoed or not inferences else round(requests / inferences, 2),
        "learner_updates_per_s": round((after["updates"] - before["updates"]) / span, 2),
        "dropped_by_learner": after["dropped_by_learner"] - before["dropped_by_learner"],
        "dropped_by_actors": after["dropped_by_actors"] - before["dropped_by_actors"],
        "eval_rounds": after["eval_rounds"] - before["eval_rounds"],
        "cores": {"games": round(sum(r["cpu_s"] for r in results) / seconds, 3), **cores},
    }


def warm_up(run: UpRun, endpoint: str) -> None:
    """Play one game until the learner has trained once: the phases then measure it training."""
    deadline = time.monotonic() + WARM_UP_S
    while not (run.status()["policies"][0].get("updates") or 0):
        if time.monotonic() > deadline:
            raise click.ClickException(f"the learner did not train within {WARM_UP_S:g} s of games playing")
        play(endpoint, 1, 2.0, processes=True)


def processes_run(
    config: Path, counts: list[int], seconds: float, overrides: tuple[str, ...], ipc: bool = False
) -> tuple[list[dict], list[dict]]:
    """One `tandem up` of `config`: per game count, its game processes served, then as many against a raw echo
    over the same transport (the transport alone, beside the run's daemons; an on-policy learner has little
    left to train on by then, the record says how much); (served, echo) phases."""
    from tandem.client.game import find_endpoint
    from tandem.daemons.config import render_toml

    with tempfile.TemporaryDirectory(prefix="tandem-bench-game-") as tmp:
        run_dir, file = Path(tmp) / "run", Path(tmp) / "game.toml"
        limit_s = 2 * len(counts) * (seconds + 60) + WARM_UP_S + 180
        file.write_text(render_toml(served_config(config, run_dir, limit_s, overrides)))
        mp = multiprocessing.get_context("spawn")
        stop, bound = mp.Event(), mp.Queue()
        # the echo over the same transport as the served games
        echo_proc = mp.Process(target=echo, args=(f"ipc://{tmp}/echo" if ipc else "tcp://127.0.0.1:*", bound, stop))
        try:
            run = UpRun(file, run_dir, Path(tmp) / "up.out")
        except RunFailed as exc:
            raise click.ClickException(str(exc)) from None
        try:
            endpoint = find_endpoint(run_dir, timeout_s=120)
            echo_proc.start()
            echo_endpoint = bound.get(timeout=60)
            warm_up(run, endpoint)
            served, echoed = [], []
            for n in counts:
                served.append(process_phase(run, endpoint, n, seconds))
                echoed.append(process_phase(run, echo_endpoint, n, seconds, echoed=True))
            return served, echoed
        finally:
            end_echo(stop, echo_proc)
            run.close()


def transport(config: Path, overrides: tuple[str, ...]) -> str:
    """How the games reach the run's action server, 'tcp' or 'ipc' (a bad config stops the bench here)."""
    bind = served_config(config, Path("run"), 1.0, overrides).actors.serve.bind
    return "ipc" if bind.startswith("ipc://") else "tcp"


def processes_record(
    config: Path, counts: list[int], seconds: float, repeats: int, overrides: tuple[str, ...], quick: bool, say
) -> dict:
    """`repeats` runs of `config`, medians over them, with the targets; `say` gets a line after each repeat."""
    how = transport(config, overrides)
    base = alone(min(seconds, 5.0))
    served_runs, echo_runs = [], []
    for r in range(repeats):
        served, echoed = processes_run(config, counts, seconds, overrides, how == "ipc")
        served_runs.append(served)
        echo_runs.append(echoed)
        say(
            f"repeat {r}: "
            + ", ".join(
                f"{s['games']} games {s['frames_per_s']:.0f}, echo {e['frames_per_s']:.0f} frames/s"
                for s, e in zip(served, echoed)
            )
        )
    training, echo_rows = median_phases(served_runs), median_phases(echo_runs)
    for k, row in enumerate(training):
        row["share_of_echo"] = paired_median(served_runs, echo_runs, k)
    met = {
        f"{row['games']}_games_frames_per_s": row["frames_per_s"] >= TARGET_FRAMES_PER_S[row["games"]]
        for row in training
        if row["games"] in TARGET_FRAMES_PER_S
    }
    return {
        "benchmark": "game",
        "mode": "processes",
        "config": str(config),
        "quick": quick,
        "seconds": seconds,
        "repeats": repeats,
        "transport": how,
        "overrides": list(overrides),
        "alone_frames_per_s": round(base, 1),
        "training": training,
        "echo": echo_rows,
        "target": {"training_frames_per_s_min": {str(n): v for n, v in TARGET_FRAMES_PER_S.items()}},
        "met": met,
    }


def processes_lines(record: dict) -> Iterator[str]:
    """The record for people: a line per game count, then the targets."""
    yield (
        f"{record['config']}, each game its own process over {record['transport']}; the game alone, no server: "
        f"{record['alone_frames_per_s']:.0f} frames/s"
    )
    for t, e in zip(record["training"], record["echo"]):
        cores = ", ".join(f"{role} {n:g}" for role, n in t["cores"].items())
        yield (
            f"{t['games']} game(s): {t['frames_per_s']:.0f} frames/s, p50 {t['latency_p50_ms']} ms p99 "
            f"{t['latency_p99_ms']} ms, batch {t['batch_mean']}, learner {t['learner_updates_per_s']:g} updates/s "
            f"(dropped {t['dropped_by_learner']:g} + {t['dropped_by_actors']:g}), {t['eval_rounds']:g} eval rounds; "
            f"cores: {cores} | raw echo {e['frames_per_s']:.0f} frames/s, p50 {e['latency_p50_ms']} ms | "
            f"served/echo {t['share_of_echo']:.3f}x"
        )
    yield from target_lines(record["met"])
