"""`tandem bench game`: served games' frames/s and latency, learner idle and training, beside a raw ZeroMQ echo."""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import click

from tandem.client.bench.game_drive import alone, echo, end_echo, play
from tandem.client.bench.game_phases import TARGET_FRAMES_PER_S, game_figures, median_phases, paired_median
from tandem.client.bench.game_processes import DEFAULT_CONFIG, processes_lines, processes_record
from tandem.client.bench.isolation import IDLE, TRAINING
from tandem.client.bench.options import counts_option, json_option, quick_option
from tandem.client.bench.report import finish, progress, target_lines
from tandem.client.config_cmd import bench_set_option

# The served run, pinned here (an installed package has no examples/): CartPole-v1 games served by one
# action server, a DQN learner. DQN, because its replay lets the same config either never train (IDLE: the
# ring must fill first) or train flat out (TRAINING_UNBOUND: each transition allows 100,000 samples, about
# 400 updates, so it trains whether or not games send anything: the echo phases run beside the same training
# as the served ones, where isolation's 64 samples per insert stops within a second of the last insert).
BASE = [
    "run.name='bench-game'",
    "env.id='CartPole-v1'",
    "actors.mode='serve'",
    "actors.count=1",
    "actors.unroll_length=32",
    "algorithm.name='double_dqn'",
    "algorithm.batch_size=256",
    "algorithm.target_update_interval=100",
    "eval.enabled=false",
    "learner.replay_min_size=1000",
]
TRAINING_UNBOUND = [*TRAINING, "learner.samples_per_insert=100000.0"]
HEARTBEAT_S = 0.5
TARGET_SHARE = 0.9  # one game keeps this share of its frame rate when the learner starts training flat out


def server_counters(run_dir: Path) -> dict:
    """The action server's heartbeat counters, with the learner's `updates` added."""
    status = subprocess.run(
        [sys.executable, "-m", "tandem", "status", "--run-dir", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    data = json.loads(status.stdout) if status.returncode in (0, 5) and status.stdout else {}
    rows = {p["name"]: p["counters"] for p in data.get("processes", [])}
    return {**rows.get("actor-0", {}), "updates": rows.get("learner-default", {}).get("updates") or 0}


def phase(endpoint: str, run_dir: Path, games: int, seconds: float, echoed: bool = False) -> dict:
    """`games` games for `seconds` (served, or against the echo); frames/s, latency p50/p99, the server's mean
    batch and the learner's updates/s meanwhile."""
    before = server_counters(run_dir)
    results = play(endpoint, games, seconds, echoed)
    time.sleep(2 * HEARTBEAT_S)  # the server's last counters of this phase reach the supervisor
    after = server_counters(run_dir)
    requests = after.get("serve_requests", 0) - before.get("serve_requests", 0)
    inferences = after.get("serve_inferences", 0) - before.get("serve_inferences", 0)
    return {
        **game_figures(results, games, seconds),
        "batch_mean": None if echoed or not inferences else round(requests / inferences, 2),
        "learner_updates_per_s": round((after["updates"] - before["updates"]) / (seconds + 2 * HEARTBEAT_S), 1),
    }


def served_run(
    training: bool, counts: list[int], seconds: float, ipc: bool, extra: tuple[str, ...] = ()
) -> tuple[list[dict], list[dict]]:
    """One `tandem up` of the pinned served run (learner idle or training flat out): a phase per game count,
    and while it trains, each followed by the same games against a raw echo (served phases, echo phases).
    `extra`: config overrides of the user's (`--set`), applied last."""
    from tandem.client.game import find_endpoint
    from tandem.daemons.config import apply_overrides, config_from_dict, render_toml

    with tempfile.TemporaryDirectory(prefix="tandem-bench-game-") as tmp:
        run_dir, config = Path(tmp) / "run", Path(tmp) / "game.toml"
        overrides = [
            *BASE,
            *(TRAINING_UNBOUND if training else IDLE),
            f"run.dir='{run_dir}'",
            f"supervisor.heartbeat_interval_s={HEARTBEAT_S}",
            f"actors.serve.bind='{'ipc://' if ipc else 'tcp://127.0.0.1:0'}'",
            f"stop.seconds={2 * len(counts) * (seconds + 10) + 180}",
            *extra,
        ]
        config.write_text(render_toml(config_from_dict(apply_overrides({}, overrides))))
        up = subprocess.Popen(
            [sys.executable, "-m", "tandem", "up", str(config), "--json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        mp = multiprocessing.get_context("spawn")
        stop, bound = mp.Event(), mp.Queue()
        echo_proc = mp.Process(target=echo, args=(f"ipc://{tmp}/echo" if ipc else "tcp://127.0.0.1:*", bound, stop))
        try:
            endpoint = find_endpoint(run_dir, timeout_s=120)
            if training:  # fill the replay until the learner trains: the phases then measure it training
                echo_proc.start()
                echo_endpoint = bound.get(timeout=60)
                deadline = time.monotonic() + 120
                while server_counters(run_dir)["updates"] == 0:
                    if time.monotonic() > deadline:
                        raise click.ClickException("the learner did not start training within 120 s")
                    play(endpoint, 1, 2.0)
                time.sleep(2 * HEARTBEAT_S)  # the warm-up's last counters arrive before the first phase's `before`
            served, echoed = [], []
            for n in counts:  # the learner trains on what the served phase sent while the echo phase runs
                served.append(phase(endpoint, run_dir, n, seconds))
                if training:
                    echoed.append(phase(echo_endpoint, run_dir, n, seconds, echoed=True))
            if not training and server_counters(run_dir)["updates"]:
                raise click.ClickException("the idle learner trained: its replay filled within the phases")
            return served, echoed
        finally:
            end_echo(stop, echo_proc)
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait(timeout=10)


@click.command("game")
@counts_option("--games", "game_counts", "1,8", "Game counts, comma-separated.", least=1)
@click.option("--seconds", default=10.0, show_default=True, help="Length of each phase.")
@click.option(
    "--repeats", default=3, show_default=True, help="Idle and training runs, alternated; medians are reported."
)
@click.option(
    "--ipc", is_flag=True, help="Games connect over ipc:// (a socket in the run directory), not loopback TCP."
)
@click.option(
    "--processes",
    is_flag=True,
    help="Each game a process of its own playing with the client library (client/game.py), served by --config's "
    "run as its file has it (its learner training, its evaluator on); beside the same processes against a raw echo.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="(--processes) The served run.  [default: the example game_cartpole.toml]",
)
@json_option
@quick_option("1 and 8 games, 3 s each, one repeat")
@bench_set_option
def game_cmd(
    game_counts: list[int],
    seconds: float,
    repeats: int,
    ipc: bool,
    processes: bool,
    config: Path | None,
    as_json: bool,
    quick: bool,
    overrides: tuple[str, ...],
) -> None:
    """Served games' frames/s and latency with the learner idle and training flat out, beside a raw ZeroMQ
    ROUTER echo driven by the same games in the same training runs; medians over repeats. With --processes:
    a served config as it is, each game its own process, as games that follow the protocol run."""
    if quick:
        game_counts, seconds, repeats = [c for c in game_counts if c <= 8][:2] or [1], 3.0, 1
    if config is not None and not processes:
        raise click.UsageError("--config goes with --processes (the lock-step games use a run of their own)")
    say = progress(as_json)
    if processes:
        extra = (*(["actors.serve.bind='ipc://'"] if ipc else []), *overrides)
        record = processes_record(config or DEFAULT_CONFIG, game_counts, seconds, repeats, extra, quick, say)
        finish(record, as_json, processes_lines(record))
        return
    base = alone(min(seconds, 5.0))
    idle_runs, training_runs, echo_runs = [], [], []
    for r in range(repeats):  # alternated, so that a change in the machine's load falls on both alike
        idle_runs.append(served_run(False, game_counts, seconds, ipc, overrides)[0])
        served, echoed = served_run(True, game_counts, seconds, ipc, overrides)
        training_runs.append(served)
        echo_runs.append(echoed)
        rows = zip(idle_runs[-1], training_runs[-1], echo_runs[-1])
        say(
            f"repeat {r}: "
            + ", ".join(
                f"{i['games']} games {i['frames_per_s']:.0f} idle, "
                f"{t['frames_per_s']:.0f} training, echo {e['frames_per_s']:.0f} "
                "frames/s"
                for i, t, e in rows
            )
        )
    idle, training, echo_rows = median_phases(idle_runs), median_phases(training_runs), median_phases(echo_runs)
    for k, row in enumerate(training):
        row["share_of_idle"] = paired_median(training_runs, idle_runs, k)
        row["share_of_echo"] = paired_median(training_runs, echo_runs, k)
    one = training[game_counts.index(1)]["share_of_idle"] if 1 in game_counts else None
    met = {"one_game_share": one is not None and one >= TARGET_SHARE}
    for row in training:
        if row["games"] in TARGET_FRAMES_PER_S:
            met[f"{row['games']}_games_frames_per_s"] = row["frames_per_s"] >= TARGET_FRAMES_PER_S[row["games"]]
    record = {
        "benchmark": "game",
        "mode": "drivers",
        "quick": quick,
        "seconds": seconds,
        "repeats": repeats,
        "transport": "ipc" if ipc else "tcp",
        "overrides": list(overrides),
        "alone_frames_per_s": round(base, 1),
        "idle": idle,
        "training": training,
        "echo": echo_rows,
        "target": {
            "one_game_share_min": TARGET_SHARE,
            "training_frames_per_s_min": {str(n): v for n, v in TARGET_FRAMES_PER_S.items()},
        },
        "met": met,
    }
    finish(record, as_json, drivers_lines(record))


def drivers_lines(record: dict) -> Iterator[str]:
    """The lock-step games' record for people: a line per game count, then the targets."""
    yield (
        f"the game alone, no server: {record['alone_frames_per_s']:.0f} frames/s; "
        f"games connect over {record['transport']}"
    )
    for i, t, e in zip(record["idle"], record["training"], record["echo"]):
        yield (
            f"{i['games']} game(s): learner idle {i['frames_per_s']:.0f} frames/s, p50 {i['latency_p50_ms']} ms "
            f"p99 {i['latency_p99_ms']} ms, batch {i['batch_mean']} | learner training "
            f"({t['learner_updates_per_s']:g} updates/s) {t['frames_per_s']:.0f} frames/s, "
            f"p50 {t['latency_p50_ms']} ms "
            f"p99 {t['latency_p99_ms']} ms, batch {t['batch_mean']} | raw echo {e['frames_per_s']:.0f} frames/s, "
            f"p50 {e['latency_p50_ms']} ms p99 {e['latency_p99_ms']} ms ({e['learner_updates_per_s']:g} updates/s) | "
            f"served/echo {t['share_of_echo']:.3f}x, training/idle {t['share_of_idle']:.3f}x"
        )
    yield from target_lines(record["met"])
