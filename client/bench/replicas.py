"""`tandem bench replicas`: updates/s and samples/s of one policy with 1, 2, ... data-parallel learner replicas, and
the gradient all-reduce's cost with and without overlapping it with the backward pass."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import click

from tandem.client.bench.options import counts_option, example_config_option, json_option, quick_option
from tandem.client.bench.replicas_solve import replica_command, solve_on_hosts
from tandem.client.bench.report import finish, progress
from tandem.client.bench.runs import json_rows, timed_run
from tandem.client.config_cmd import bench_set_option
from tandem.client.harness import start_session
from tandem.client.netns import Hosts, NetnsError
from tandem.daemons.config import load_config

MIN_TRAINED_S = 2.0  # metrics rows come once a second: a rate needs a few of them


def replica_names(replicas: int) -> list[str]:
    return ["learner-default", *(f"learner-default@{rank}" for rank in range(1, replicas))]


def all_training(names: list[str]) -> Callable[[Path], bool]:
    """A test of a run directory: has every one of these learners written a metrics row with an update made?"""

    def test(run_dir: Path) -> bool:
        return all(
            any(row.get("updates", 0) > 0 for row in json_rows(run_dir / name / "metrics.jsonl")) for name in names
        )

    return test


def delta(first: dict, last: dict, key: str) -> float:
    return float(last.get(key, 0) - first.get(key, 0))


def hand_started(hosts: Hosts) -> Callable[[Path], list[subprocess.Popen]]:
    """Replica R started by hand in host R's namespace (`tandem learner --rank R`), as on machines of their own."""

    def start(run_dir: Path) -> list[subprocess.Popen]:
        endpoint = (run_dir / "endpoint").read_text().strip()
        started = []
        for rank in range(len(hosts.places)):
            command = replica_command(hosts, rank, str(run_dir / "config.toml"), endpoint)
            with open(run_dir / f"learner-{rank}.out", "ab") as out:
                started.append(start_session(command, out, Path.cwd()))
        return started

    return start


def replica_figures(
    config: Path,
    replicas: int,
    actors: int,
    seconds: float,
    overrides: tuple[str, ...],
    overlap: bool = True,
    on_hosts: bool = False,
) -> dict:
    """One `tandem up` with `replicas` learner replicas (no evaluator), `seconds` long from the moment every
    replica has trained (the group formed, each with data): what each replica trained. `on_hosts`: each replica
    in a network namespace of its own, joined to the run over a bridge, started by hand."""
    names = replica_names(replicas)
    overrides = (*overrides, f"learner.allreduce_overlap={str(overlap).lower()}")
    with tempfile.TemporaryDirectory(prefix="tandem-bench-replicas-") as tmp, contextlib.ExitStack() as stack:
        run_dir = Path(tmp) / "run"
        flags: tuple[str, ...] = ()
        companions = None
        if on_hosts:
            try:
                hosts = stack.enter_context(Hosts(replicas))
            except NetnsError as exc:
                raise click.ClickException(f"--hosts: {exc}") from exc
            remote = ["learner.remote=true", "learner.replicas_trusted_network=true", f"transport.host='{hosts.head}'"]
            overrides, flags, companions = (*overrides, *remote), ("--insecure",), hand_started(hosts)
        figures = timed_run(
            config,
            seconds,
            [f"learner.replicas={replicas}", f"actors.count={actors}", "eval.enabled=false", *overrides],
            keep_dir=run_dir,
            ready=all_training(names),
            flags=flags,
            companions=companions,
        )
        per_replica = {name: json_rows(run_dir / name / "metrics.jsonl") for name in names}
    batch = load_config(config, list(overrides)).algorithm.batch_size
    out = {
        "replicas": replicas,
        "hosts": replicas if on_hosts else 1,
        "overlap": overlap if replicas > 1 else None,
        "actors": actors,
        "env_steps_per_s": round(
            figures.summary.get("env_steps", 0) / max(figures.summary.get("elapsed_s", seconds), 1e-9), 1
        ),
    }
    samples_per_s = 0.0
    for name, rows in per_replica.items():
        training = [r for r in rows if r.get("updates", 0) > 0]
        trained_s = training[-1]["time"] - training[0]["time"] if training else 0.0
        if trained_s < MIN_TRAINED_S:
            raise click.ClickException(
                f"{name} trained for {trained_s:.1f} s (its metrics rows with an update made), under "
                f"{MIN_TRAINED_S:g} s: nothing to measure; see its log in the run directory"
            )
        first, last = training[0], training[-1]
        rate = (last["updates"] - first["updates"]) / trained_s
        samples_per_s += rate * batch
        if name == "learner-default":
            updates = max(last["updates"] - first["updates"], 1)
            out["updates_per_s"] = round(rate, 2)
            out["trained_s"] = round(trained_s, 1)  # replica 0's rows with an update made, first to last
            # the learner's time held up by the gradient all-reduce (launches, and waits after backward)
            out["allreduce_ms_per_update"] = round(1000 * delta(first, last, "gradient_allreduce_s") / updates, 2)
            out["allreduce_kb_per_update"] = round(delta(first, last, "gradient_allreduce_bytes") / 1024 / updates, 1)
            buckets = delta(first, last, "gradient_buckets")
            out["buckets_per_update"] = round(buckets / updates, 2)
            # buckets whose reduce was complete when backward ended: wholly hidden behind the backward pass
            out["buckets_done_in_backward"] = round(delta(first, last, "gradient_buckets_early") / max(buckets, 1), 3)
            out["collective_wait_share"] = round(delta(first, last, "collective_wait_s") / trained_s, 3)
        out["replica_mismatches"] = out.get("replica_mismatches", 0) + last.get("replica_mismatches", 0)
    out["samples_per_s"] = round(samples_per_s, 1)
    return out


@click.command("replicas")
@example_config_option("cartpole_appo.toml", "The run (APPO or Double DQN).")
@counts_option("--replicas", "replica_counts", "1,2", "Replica counts to run, comma-separated.")
@click.option("--actors", default=2, show_default=True, help="Actors in every run (at least the most replicas).")
@click.option(
    "--seconds",
    default=30.0,
    show_default=True,
    help="Length of each run, counted from when every replica has made its first update.",
)
@click.option(
    "--overlap",
    type=click.Choice(["both", "on", "off"]),
    default="both",
    show_default=True,
    help="Gradient all-reduce overlapped with backward (on), after it (off), or each in turn for every count above 1.",
)
@click.option(
    "--hosts",
    "on_hosts",
    is_flag=True,
    help="Each replica on a host of its own: a network namespace per replica, joined to the run over a bridge, the "
    "replica started by hand as on other machines (root and iproute2 needed).",
)
@click.option(
    "--solve",
    is_flag=True,
    help="Train to the config's stop.eval_return instead, each replica with its actors on a host of its own (a "
    "network namespace; the supervisor and evaluator on the head; root and iproute2 needed): --seconds bounds "
    "each run, --hosts is implied, --overlap is the config's.",
)
@bench_set_option
@json_option
@quick_option("1 and 2 replicas for 12 s of training each")
def replicas_cmd(
    config: Path,
    replica_counts: list[int],
    actors: int,
    seconds: float,
    overlap: str,
    on_hosts: bool,
    solve: bool,
    overrides: tuple[str, ...],
    as_json: bool,
    quick: bool,
) -> None:
    """Updates/s and samples/s of one policy with 1, 2, ... learner replicas, and the all-reduce's cost.

    samples/s is every replica's updates/s times the batch size, summed; the all-reduce figure is replica 0's
    time held up by gradient all-reduces per update (waiting for the slowest replica included), with the bytes
    reduced and the share of buckets already reduced when backward ended; the collective share is the part of
    its time spent in any collective. With --overlap both, each count above 1 runs with the all-reduce overlapped
    with backward and after it, one after the other, and the two are compared.
    """
    if not replica_counts or min(replica_counts) < 1 or max(replica_counts) > actors:
        raise click.BadParameter(
            f"replica counts must be 1..{actors} (each replica needs an actor; --actors {actors})",
            param_hint="--replicas",
        )
    if solve and quick:
        raise click.UsageError("--solve trains to the config's return: it has no --quick form")
    if quick:
        seconds = min(seconds, 12.0)
    if solve:
        solve_cmd(config, replica_counts, actors, seconds, overrides, as_json)
        return
    modes = {"both": [True, False], "on": [True], "off": [False]}[overlap]
    say, results = progress(as_json), []
    for count in replica_counts:
        for mode in modes if count > 1 else [True]:
            results.append(r := replica_figures(config, count, actors, seconds, overrides, mode, on_hosts))
            how = "" if count == 1 else (" overlapped" if mode else " after backward")
            where = f" on {count} host(s)" if on_hosts else ""
            say(
                f"{count} replica(s){where}, {actors} actors: {r['updates_per_s']} updates/s, {r['samples_per_s']:.0f} "
                f"samples/s, gradient all-reduce{how} {r['allreduce_ms_per_update']} ms/update "
                f"({r['allreduce_kb_per_update']:.0f} KiB in {r['buckets_per_update']} buckets, "
                f"{100 * r['buckets_done_in_backward']:.0f}% done within backward), "
                f"{100 * r['collective_wait_share']:.0f}% of the time in collectives, "
                f"{r['env_steps_per_s']:.0f} env steps/s, weight mismatches {r['replica_mismatches']}"
            )
    base = results[0]["samples_per_s"] or 1.0
    for r in results:
        r["samples_per_s_ratio"] = round(r["samples_per_s"] / base, 3)
    record = {
        "benchmark": "replicas",
        "quick": quick,
        "config": str(config),
        "seconds": seconds,
        "hosts": on_hosts,
        "runs": results,
    }
    ratios = ", ".join(
        f"{r['replicas']}{'' if r['overlap'] is None else (' on' if r['overlap'] else ' off')}: "
        f"{r['samples_per_s_ratio']}x"
        for r in results
    )
    lines = [f"samples/s against the first: {ratios}"]
    for count in replica_counts:
        on = [r for r in results if r["replicas"] == count and r["overlap"] is True]
        off = [r for r in results if r["replicas"] == count and r["overlap"] is False]
        if on and off and off[0]["allreduce_ms_per_update"] > 0:
            lines.append(
                f"{count} replicas: all-reduce held the learner {on[0]['allreduce_ms_per_update']} ms/update "
                f"overlapped against {off[0]['allreduce_ms_per_update']} after backward "
                f"({on[0]['allreduce_ms_per_update'] / off[0]['allreduce_ms_per_update']:.2f}x)"
            )
    finish(record, as_json, lines)


def solve_cmd(
    config: Path, replica_counts: list[int], actors: int, seconds: float, overrides: tuple[str, ...], as_json: bool
) -> None:
    say, results = progress(as_json), []
    for count in replica_counts:
        results.append(r := solve_on_hosts(config, count, actors, seconds, overrides))
        reached = f"solved ({r['target']:g}) in {r['seconds']} s" if r["solved"] else f"not solved in {r['seconds']} s"
        say(
            f"{count} replica(s) on {count} host(s), {actors} actors spread over them: {reached}, eval return "
            f"{r['eval_return']}, {r['env_steps']} env steps, updates {r['updates']}, weights compared "
            f"{r['weight_checks']} times, mismatches {r['weight_mismatches']}, generations {r['generations']}"
        )
    record = {"benchmark": "replicas", "solve": True, "config": str(config), "seconds": seconds, "runs": results}
    lines = [f"actors feed: {r['actors_feed']}" for r in results]
    finish(record, as_json, lines)
