"""`tandem bench NAME --quick --json` runs and prints a complete record (targets are reported, not asserted)."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from tandem.client.cli import cli


def record(*args) -> dict:
    result = CliRunner().invoke(cli, ["bench", *args, "--quick", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_replay_record_is_complete():
    data = record("replay")
    assert data["benchmark"] == "replay" and data["quick"] is True
    got = {(r["kind"], r["capacity"]) for r in data["results"]}
    assert got == {(k, c) for k in ("uniform", "prioritized") for c in (10_000, 100_000, 1_000_000)}
    assert all(r["median_us"] > 0 for r in data["results"])
    assert set(data["ratios"]) == {"uniform", "prioritized"} and set(data["met"]) == {"uniform", "prioritized"}
    assert data["target"]["ratio_1m_to_10k_max"] == 1.5


@pytest.mark.timeout(120)
def test_e2e_record_is_complete():
    data = record("e2e")
    assert data["benchmark"] == "e2e" and len(data["runs"]) == 1
    run = data["runs"][0]
    assert {"seed", "solve_s", "wall_s", "solved", "reason", "updates", "env_steps"} <= set(run)
    assert run["env_steps"] > 0 and data["median_s"] > 0 and isinstance(data["met"], bool)
    if run["solved"]:  # the time to solve ends when the stop condition held, before the daemons shut down
        assert 0 < run["solve_s"] <= run["wall_s"]


@pytest.mark.timeout(150)
def test_atari_record_is_complete():
    data = record("atari")
    assert data["benchmark"] == "atari" and [r["actors"] for r in data["runs"]] == [1]
    run = data["runs"][0]
    # The rate is the supervisor's recent one at the end: on a loaded machine the actor may be between
    # ticks then; that it stepped at all is what a smoke run can promise.
    assert run["env_steps"] > 0 and run["frames_per_s"] == pytest.approx(4 * run["env_steps_per_s"], rel=0.01)
    assert run["cpu_percent_mean"] > 0 and 0.0 <= run["learner_dropped_share"] <= 1.0
    assert data["learning_curve"] == []


@pytest.mark.timeout(120)
def test_lag_record_is_complete():
    data = record("lag")
    assert data["benchmark"] == "lag" and [(r["actors"], r["pace"]) for r in data["runs"]] == [(1, "on"), (1, "off")]
    for run in data["runs"]:
        assert 0.0 <= run["thrown_away_share"] <= 1.0 and 0.0 <= run["paced_share"] <= 1.0
        assert 0.0 <= run["thrown_away_share_training"] <= 1.0 and run["training_updates_per_s"] >= 0.0
        assert run["pace_per_s_mean"] >= 0.0 and run["env_steps_per_s"] > 0
        # A smoke run of 8 s on a loaded 2-core machine may end before the learner has read its first unroll
        # (both daemons import torch first); what it does promise is that training needs data read.
        assert run["unrolls_received"] >= 0 and run["updates"] >= 0
        assert run["updates"] == 0 or run["unrolls_received"] > 0
        assert 0.0 <= run["dropped_for_lag_share"] <= 1.0 and 0.0 <= run["dropped_queue_full_share"] <= 1.0
        assert run["arrival_lag_mean"] is None if run["updates"] == 0 else run["arrival_lag_mean"] >= 0.0


@pytest.mark.timeout(240)
def test_replicas_record_is_complete():
    data = record("replicas")
    assert data["benchmark"] == "replicas"
    assert [(r["replicas"], r["overlap"]) for r in data["runs"]] == [(1, None), (2, True), (2, False)]
    one, *twos = data["runs"]
    assert one["samples_per_s"] > 0 and one["samples_per_s_ratio"] == 1.0
    assert one["allreduce_ms_per_update"] == 0.0 and one["allreduce_kb_per_update"] == 0.0  # alone: no all-reduce
    for two in twos:
        assert two["samples_per_s"] > 0 and two["allreduce_ms_per_update"] > 0.0
        assert 0.0 < two["collective_wait_share"] <= 1.0 and two["replica_mismatches"] == 0
        assert two["buckets_per_update"] >= 1.0 and 0.0 <= two["buckets_done_in_backward"] <= 1.0
    # the same network's gradients either way, whatever the bucketing
    assert twos[0]["allreduce_kb_per_update"] > 0
    assert twos[0]["allreduce_kb_per_update"] == pytest.approx(twos[1]["allreduce_kb_per_update"], rel=0.01)
    # the seconds count from every replica's first update, so a slow start (imports, the group forming on a
    # loaded machine) leaves the measured part whole; rows come once a second, hence the one second of slack
    assert all(r["trained_s"] >= data["seconds"] - 1.5 for r in data["runs"])


@pytest.mark.timeout(240)
def test_replicas_on_hosts_of_their_own_record_is_complete():
    """Each replica in a network namespace of its own, started by hand and joined over a bridge."""
    data = record("replicas", "--hosts", "--replicas", "2", "--overlap", "on")
    assert data["hosts"] is True and [(r["replicas"], r["hosts"]) for r in data["runs"]] == [(2, 2)]
    run = data["runs"][0]
    assert run["samples_per_s"] > 0 and run["allreduce_ms_per_update"] > 0 and run["replica_mismatches"] == 0
    assert run["allreduce_kb_per_update"] > 0 and run["trained_s"] >= data["seconds"] - 1.5


# NCCL needs a GPU per member: a group of one on the GPU where there is one (the whole NCCL path, every collective)
ALLREDUCE_GROUPS = [("cpu", 2)] + ([("cuda", 1)] if torch.cuda.is_available() else [])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device, members", ALLREDUCE_GROUPS)
def test_allreduce_record_is_complete(device, members):
    data = record("allreduce", "--device", device, "--members", str(members))
    assert data["benchmark"] == "allreduce" and data["members"] == members
    after, overlapped = data["medians"]["after"], data["medians"]["overlapped"]
    # the Nature CNN's 1.69M gradients, float32, either way; one bucket after backward, several while it runs
    assert (
        after["kb_per_step"] == pytest.approx(overlapped["kb_per_step"]) == pytest.approx(1687206 * 4 / 1024, rel=0.01)
    )
    assert after["buckets_per_step"] == 1 and overlapped["buckets_per_step"] >= 2
    assert after["done_in_backward"] == 0 and 0 <= overlapped["done_in_backward"] <= 1
    assert after["held_ms"] > 0 and overlapped["held_ms"] > 0 and data["ratios"]["held_overlapped_over_after"] > 0


@pytest.mark.timeout(180)
def test_transport_record_is_complete():
    data = record("transport")
    assert data["benchmark"] == "transport"
    keys = {(r["path"], r["transport"], r["payload"]) for r in data["results"]}
    for payload in ("cartpole", "atari"):
        for transport in ("ipc", "tcp"):
            assert ("tandem", transport, payload) in keys and ("raw-pyzmq", transport, payload) in keys
            assert ("raw-same", transport, payload) in keys
        assert ("mp.Queue", "mp.Queue", payload) in keys
        assert {("tandem-sender", "ipc", payload), ("tandem-receiver", "ipc", payload)} <= keys
        # the same messages through shared memory: the same bytes moved, compared with ZeroMQ ipc
        assert ("shm-same", "shm", payload) in keys and data["ratios"][f"{payload}/shm_same_over_raw_same_ipc"] > 0
        # the checking sender differs from tandem's only where stacks are kept as frames
        assert (("tandem-checked", "ipc", payload) in keys) == (payload == "atari")
        for half in ("sender", "receiver"):  # each half alone, against the same raw baseline
            rate = next(
                r["batches_per_s"] for r in data["results"] if r["path"] == f"tandem-{half}" and r["payload"] == payload
            )
            raw = next(
                r["batches_per_s"]
                for r in data["results"]
                if r["path"] == "raw-pyzmq" and r["transport"] == "ipc" and r["payload"] == payload
            )
            assert data["ratios"][f"{payload}/ipc/{half}_alone_over_raw"] == pytest.approx(rate / raw, abs=0.002)
    assert all(r["batches_per_s"] > 0 for r in data["results"])
    assert set(data["met"]) and set(data["targets"]) and {"tandem", "raw-pyzmq", "raw-same"} <= set(data["sends"])
    wire = {(r["path"], r["payload"]): r["wire_bytes_per_unroll"] for r in data["results"]}
    # Atari-like stacks travel as their frames (a quarter of the bytes, plus each message's history)
    assert wire[("tandem", "atari")] == wire[("raw-same", "atari")] == wire[("shm-same", "atari")]
    assert wire[("raw-same", "atari")] < 0.3 * wire[("raw-pyzmq", "atari")]


@pytest.mark.timeout(120)
def test_isolation_record_is_complete():
    data = record("isolation")
    assert data["benchmark"] == "isolation"
    assert data["idle_steps_per_s"] > 0 and data["training_steps_per_s"] > 0 and data["learner_updates_per_s"] > 0
    assert data["ratio"] > 0 and data["target"]["ratio_min"] == 0.9 and isinstance(data["met"], bool)


def test_all_runs_each_benchmark_and_combines_records(monkeypatch):
    """`bench all` collects one record per benchmark (replay only here, to keep the test short)."""
    from tandem.client.bench import group

    monkeypatch.setattr(group, "BENCHMARKS", {"replay": group.BENCHMARKS["replay"]})
    data = record("all")
    assert data["benchmark"] == "all" and data["quick"] is True
    assert set(data["records"]) == {"replay"} and data["records"]["replay"]["benchmark"] == "replay"


@pytest.mark.timeout(90)
def test_broadcast_record_is_complete():
    data = record("broadcast")
    assert data["benchmark"] == "broadcast" and data["quick"] is True
    got = {(r["size"], r["actors"]) for r in data["results"]}
    assert got == {(s, a) for s in ("100KiB", "10MiB") for a in (1, 4)}
    for r in data["results"]:
        assert r["raw_median_ms"] > 0 and r["tandem_median_ms"] > 0
        assert r["ratio"] == pytest.approx(r["tandem_median_ms"] / r["raw_median_ms"], rel=0.01)
    assert data["target"]["ratio_10MiB_max_actors_max"] == 1.5 and isinstance(data["met"], bool)
    stalled = data["stalled_subscriber"]
    assert (
        stalled["stopped"] == 1 and stalled["versions"] == 10 and stalled["rss_peak_mb"] >= stalled["rss_before_mb"] > 0
    )
    growth = (stalled["rss_peak_mb"] - stalled["rss_before_mb"]) * 2**20 / stalled["blob_bytes"]
    assert stalled["growth_blobs"] == pytest.approx(growth, abs=0.05)
    assert stalled["target"]["growth_blobs_max"] == 4.0 and isinstance(stalled["met"], bool)


@pytest.mark.timeout(120)
def test_scale_record_is_complete():
    data = record("scale")
    assert data["benchmark"] == "scale" and data["machine"]["usable_cores"] >= 1
    rows = data["rows"]
    assert [r["actors"] for r in rows] == [1, 2] and all(r["steps_per_s"] > 0 for r in rows)
    assert rows[0]["speedup"] == 1.0
    assert abs(rows[1]["speedup"] - rows[1]["steps_per_s"] / rows[0]["steps_per_s"]) < 0.01
    assert rows[1]["efficiency"] == pytest.approx(
        rows[1]["speedup"] / min(2, data["machine"]["usable_cores"]), abs=0.01
    )


def test_vector_record_has_every_mode_and_a_bad_mode_names_the_key():
    data = record("vector", "--modes", ",sync,async", "--set", "env.num_envs=2")
    assert data["benchmark"] == "vector" and data["num_envs"] == 2
    assert [r["vector"] for r in data["rows"]] == ["", "sync", "async"] and data["rows"][0]["ratio"] == 1.0
    assert all(r["steps_per_s"] > 0 for r in data["rows"])
    result = CliRunner().invoke(cli, ["bench", "vector", "--quick", "--modes", ",threads"])
    assert result.exit_code == 2 and "env.vector" in result.output


def test_entities_record_has_every_form_and_bytes_that_grow_with_the_entities():
    data = record("entities", "--entities", "8", "--features", "4", "--set", "env.num_envs=2")
    assert data["benchmark"] == "entities" and data["num_envs"] == 2 and data["overrides"] == ["env.num_envs=2"]
    assert data["actors_device"] == "cpu"
    forms = {r["form"]: r for r in data["rows"]}
    assert set(forms) == {"entities (attention)", "entities (padded MLP)", "flat Box (MLP)",
                          "entities, random actions", "flat Box, random actions"}  # fmt: skip
    assert all(r["steps_per_s"] > 0 for r in data["rows"]) and forms["flat Box (MLP)"]["ratio"] == 1.0
    assert forms["entities (attention)"]["ratio"] == pytest.approx(
        forms["entities (attention)"]["steps_per_s"] / forms["flat Box (MLP)"]["steps_per_s"], abs=0.01
    )
    wire = data["wire"]  # 1, 2, 4 and 8 present: each one more costs its 16 bytes of features and a share of obs[T]
    assert [w["entities"] for w in wire] == [1, 2, 4, 8]
    steps = [b["bytes_per_step"] - a["bytes_per_step"] for a, b in zip(wire, wire[1:])]
    assert all(s > 0 for s in steps)
    assert data["wire_bytes_per_entity"] == pytest.approx(16 * 33 / 32, abs=0.01)  # obs[T] rows: 1 in 32 steps
    for w in wire:  # bytes = fixed + per entity x present, the line through the first and last points
        assert w["bytes_per_step"] == pytest.approx(
            data["wire_bytes_fixed"] + data["wire_bytes_per_entity"] * w["entities"], abs=0.2
        )
    for setting, option in [("model.kind='mlp'", "model.kind"), ("env.kwargs.flat=true", "env.kwargs")]:
        refused = CliRunner().invoke(cli, ["bench", "entities", "--quick", "--set", setting])
        assert refused.exit_code == 2 and option in refused.output and "the bench sets it" in refused.output


@pytest.mark.timeout(300)
def test_intake_record_is_complete():
    data = record("intake", "--device", "cpu")
    assert data["benchmark"] == "intake" and data["quick"] is True and data["device"] == "cpu"
    for model in ("cartpole", "atari"):
        result = data["results"][model]
        runs = result["runs"]
        assert set(runs) == {"no_intake", "no_intake_no_prefetch", "flood_thread", "flood_inline"}
        assert all(
            r["samples_per_s"] > 0 and r["intake_errors"] == 0 and r["batches_malformed"] == 0 for r in runs.values()
        )
        assert runs["flood_thread"]["batches_received_per_s"] > 0 and runs["flood_inline"]["batches_received_per_s"] > 0
        assert runs["no_intake"]["batches_received_per_s"] == 0
        limits = result["limits"]
        assert limits["forward_backward_step_samples_per_s"] > 0 and limits["update_on_device_samples_per_s"] > 0
        share = runs["flood_thread"]["samples_per_s"] / runs["no_intake"]["samples_per_s"]
        assert result["share_kept"]["flood_thread"] == pytest.approx(share, rel=0.01)
    assert data["target"]["share_kept_min"] == 0.8 and set(data["met"]) == {"cartpole", "atari"}


@pytest.mark.timeout(180)
def test_game_record_is_complete():
    data = record("game", "--set", "actors.serve.max_batch=4")  # an override of the user's reaches the server
    assert data["benchmark"] == "game" and data["repeats"] == 1 and data["alone_frames_per_s"] > 0
    assert data["transport"] == "tcp" and data["overrides"] == ["actors.serve.max_batch=4"]
    for side in ("idle", "training", "echo"):
        assert [p["games"] for p in data[side]] == [1, 8]
        for p in data[side]:
            assert p["frames_per_s"] > 0 and 0 < p["latency_p50_ms"] <= p["latency_p99_ms"]
            assert p["batch_mean"] is None or 1 <= p["batch_mean"] <= min(p["games"], 4)
    assert all(p["batch_mean"] is None for p in data["echo"])  # the echo has no server, no batches
    # the idle learner never trained (the bench refuses a run where it did); the other one did, meanwhile, and
    # went on training while the same games played against the raw echo
    assert all(p["learner_updates_per_s"] == 0 for p in data["idle"])
    assert all(p["learner_updates_per_s"] > 0 for p in data["training"] + data["echo"])
    for idle, training, echo in zip(data["idle"], data["training"], data["echo"]):
        assert training["share_of_idle"] == pytest.approx(training["frames_per_s"] / idle["frames_per_s"], rel=0.01)
        assert training["share_of_echo"] == pytest.approx(training["frames_per_s"] / echo["frames_per_s"], rel=0.01)
    assert data["target"] == {"one_game_share_min": 0.9, "training_frames_per_s_min": {"1": 2000.0, "8": 6000.0}}
    assert set(data["met"]) == {"one_game_share", "1_games_frames_per_s", "8_games_frames_per_s"}
    assert all(isinstance(ok, bool) for ok in data["met"].values())


@pytest.mark.timeout(180)
def test_game_solve_record_is_complete():
    data = record("game-solve")
    assert data["benchmark"] == "game-solve" and data["games"] == 2
    for side in ("served", "builtin"):
        (run,) = data[side]
        assert {"seed", "solve_s", "wall_s", "solved", "reason", "updates", "env_steps"} <= set(run)
        assert run["env_steps"] > 0  # the games (or the built-in actor's envs) played and the learner saw it
        assert data[f"{side}_median_s"] > 0
    assert data["served"][0]["game_errors"] == []  # every game process played until the run's end
