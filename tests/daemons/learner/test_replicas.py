"""Data-parallel learner replicas: weights bit-identical across real torch.distributed (Gloo) processes for APPO and
DQN, a collective that times out instead of waiting for ever, and the supervisor's side (rendezvous, actors spread)."""

from __future__ import annotations

import dataclasses
import datetime
import multiprocessing
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from tandem.client.member_processes import results_of
from tandem.daemons.algorithms import make_algorithm, make_policy
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.replica_group import Place, ReplicaGroup
from tandem.daemons.replay import SampledBatch
from tandem.daemons.runtime.names import replica_rank
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.supervisor.ports import plan_children
from tandem.daemons.supervisor.replicas import ReplicaSets
from tandem.protocol import TransitionBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(3)
UPDATES = 6
WAIT_S = 60.0  # every wait on a worker is bounded


def config(name: str, replicas: int = 2, actors: int = 2, **learner):
    algorithm = {"name": name, "batch_size": 32} if name == "appo" else {"name": name}
    return config_from_dict(
        {
            "algorithm": algorithm,
            "model": {"hidden_sizes": [16]},
            "actors": {"count": actors},
            "learner": {"replicas": replicas, **learner},
        }
    )


def appo_payload(cfg, rng: np.random.Generator) -> list[TransitionBatch]:
    """One unroll of 8 steps x 4 envs acted by a policy, with rewards of this replica's own."""
    policy = make_policy(cfg, OBS, ACTIONS, seed=int(rng.integers(1000)))
    obs = rng.uniform(-1, 1, (9, 4, 3)).astype(np.float32)
    acted = [policy.explore(obs[t], np.zeros(4)) for t in range(8)]
    done = np.zeros((8, 4), bool)
    return [
        TransitionBatch(
            "default",
            "actor-0",
            0,
            0,
            0,
            0,
            obs,
            np.stack([a for a, _ in acted]),
            rng.normal(size=(8, 4)).astype(np.float32),
            done,
            done,
            rng.uniform(-1, 1, (1, 3)).astype(np.float32),
            {BEHAVIOUR_LOGP: np.stack([e[BEHAVIOUR_LOGP] for _, e in acted])},
        )
    ]


def dqn_payload(rng: np.random.Generator, size: int = 32) -> SampledBatch:
    return SampledBatch(
        obs=rng.normal(size=(size, 3)).astype(np.float32),
        actions=rng.integers(3, size=size).astype(np.int64),
        returns=rng.normal(size=size).astype(np.float32),
        next_obs=rng.normal(size=(size, 3)).astype(np.float32),
        discounts=rng.choice([0.0, 0.99], size=size).astype(np.float32),
        versions=np.zeros(size, np.int64),
        indices=np.arange(size, dtype=np.int64),
        weights=np.ones(size, np.float32),
    )


def replica(
    rank: int, port: int, name: str, hooks: bool, out, overlap: bool = True, bucket_bytes: int = 1 << 20
) -> None:
    """One replica in a process of its own: its own initial weights (seeded by rank) and its own data."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        store = dist.TCPStore("127.0.0.1", port, 2, is_master=False, timeout=datetime.timedelta(seconds=30))
        dist.init_process_group(
            "gloo",
            store=dist.PrefixStore(f"test/{name}/{hooks}/{overlap}/{bucket_bytes}", store),
            rank=rank,
            world_size=2,
            timeout=datetime.timedelta(seconds=10),
        )
        group = ReplicaGroup(
            Place(rank, 2, 1, f"127.0.0.1:{port}"), 10.0, {}, check_every=1, bucket_bytes=bucket_bytes, overlap=overlap
        )
        cfg = config_from_dict(
            {
                "algorithm": {"name": name, "batch_size": 32} if name == "appo" else {"name": name},
                "model": {"hidden_sizes": [16]},
                "run": {"seed": 10 + rank},  # different initial weights: the group's start must make them one
            }
        )
        algorithm = make_algorithm(cfg, OBS, ACTIONS, "cpu")
        group.copy_from_first(algorithm)
        if hooks:
            group.install()
        rng = np.random.default_rng(100 + rank)
        sums = []
        for update in range(1, UPDATES + 1):
            algorithm.update(appo_payload(cfg, rng) if name == "appo" else dqn_payload(rng))
            group.after_update(algorithm, update)
            sums.append(group.checksum(algorithm))
        weights = {k: v.tobytes() for k, v in algorithm.weights().items()}
        out.put((rank, weights, sums, dict(group.counts)))
        group.close()
    except BaseException as exc:  # the test reads it instead of waiting for a result that never comes
        out.put((rank, f"{type(exc).__name__}: {exc}", [], {}))


def run_pair(name: str, hooks: bool, overlap: bool = True, bucket_bytes: int = 1 << 20) -> dict[int, tuple]:
    import torch.distributed as dist

    master = dist.TCPStore(
        "127.0.0.1", 0, 2, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=30)
    )
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=replica, args=(rank, master.port, name, hooks, out, overlap, bucket_bytes))
        for rank in (0, 1)
    ]
    return {rank: tuple(rest) for rank, *rest in results_of(procs, out, WAIT_S)}


@pytest.mark.parametrize("name", ["appo", "double_dqn"])
def test_replicas_hold_bit_identical_weights_after_every_update(name):
    results = run_pair(name, hooks=True)
    for rank in (0, 1):
        assert isinstance(results[rank][0], dict), results[rank][0]
    (w0, sums0, counts0), (w1, sums1, _) = results[0], results[1]
    assert sums0 == sums1  # after every update, not only at the end
    assert w0 == w1  # byte for byte
    assert counts0["replica_checks"] == UPDATES and counts0["replica_mismatches"] == 0
    assert counts0["gradient_allreduce_s"] > 0


@pytest.mark.parametrize("name", ["appo", "double_dqn"])
def test_gradients_reduced_in_buckets_during_backward_train_the_same_bits_as_one_reduce_after_it(name):
    """Buckets of 128 bytes cut the small network into several, each reduced as backward makes it; two replicas'
    sums are the same bits in any bucketing, so the weights must equal those of one flat all-reduce after backward."""
    bucketed = run_pair(name, hooks=True, overlap=True, bucket_bytes=128)
    flat = run_pair(name, hooks=True, overlap=False)
    for results in (bucketed, flat):
        for rank in (0, 1):
            assert isinstance(results[rank][0], dict), results[rank][0]
    assert bucketed[0][0] == bucketed[1][0] == flat[0][0]
    per_update = bucketed[0][2]["gradient_buckets"] / flat[0][2]["gradient_buckets"]
    assert per_update >= 3  # several buckets where the flat path has one all-reduce per optimizer step
    assert bucketed[0][2]["gradient_allreduce_bytes"] == flat[0][2]["gradient_allreduce_bytes"]


def test_without_averaged_gradients_the_comparison_finds_the_replicas_apart_and_mends_them():
    # the same run with the gradient hooks left out: each replica steps on its own data alone
    results = run_pair("appo", hooks=False)
    (w0, sums0, counts0), (w1, sums1, counts1) = results[0], results[1]
    assert counts0["replica_mismatches"] == UPDATES == counts1["replica_mismatches"]  # seen after every update
    assert sums0 == sums1 and w0 == w1  # ... and replica 0's weights copied to the other each time


def lone_replica(port: int, out) -> None:
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, 2, is_master=False, timeout=datetime.timedelta(seconds=30))
    dist.init_process_group(
        "gloo", store=dist.PrefixStore("test/lone", store), rank=1, world_size=2, timeout=datetime.timedelta(seconds=10)
    )
    out.put("joined")
    time.sleep(30)  # never takes part in a collective: the other must give up on its own


def test_a_collective_with_a_silent_replica_times_out_instead_of_waiting_for_ever():
    import torch.distributed as dist

    master = dist.TCPStore(
        "127.0.0.1", 0, 2, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=30)
    )
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    silent = ctx.Process(target=lone_replica, args=(master.port, out))
    silent.start()
    try:
        dist.init_process_group(
            "gloo",
            store=dist.PrefixStore("test/lone", master),
            rank=0,
            world_size=2,
            timeout=datetime.timedelta(seconds=10),
        )
        assert out.get(timeout=WAIT_S) == "joined"
        group = ReplicaGroup(Place(0, 2, 1, "x:1"), 1.0, {})
        start = time.monotonic()
        with pytest.raises(ReplicaError, match="agreement to update.*collective_timeout_s"):
            group.agree(True, False)
        assert time.monotonic() - start < 8.0
        group.close()
        assert not dist.is_initialized()
    finally:
        silent.kill()
        silent.join(5)


def test_replicas_meet_at_their_generation_store_for_longer_than_the_collective_timeout():
    """A replica restarted with its group may arrive later than Gloo's short connection wait: the store's counter
    waits for it (to the rendezvous deadline), and gives up at that deadline when it never comes."""
    import threading

    import torch.distributed as dist

    from tandem.daemons.learner.replica_join import wait_for_everyone

    master = dist.TCPStore(
        "127.0.0.1", 0, 2, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=30)
    )
    late = dist.TCPStore("127.0.0.1", master.port, 2, is_master=False, timeout=datetime.timedelta(seconds=30))
    arrival = threading.Timer(1.5, wait_for_everyone, (dist.PrefixStore("g/2", late), 2, time.monotonic() + 30))
    start = time.monotonic()
    arrival.start()
    try:
        wait_for_everyone(dist.PrefixStore("g/2", master), 2, time.monotonic() + 30)
        assert 1.4 < time.monotonic() - start < 20  # until the late one counted itself in, no longer
    finally:
        arrival.join(WAIT_S)
    # another generation counts from zero; alone, the wait ends at its deadline
    start = time.monotonic()
    wait_for_everyone(dist.PrefixStore("g/3", master), 2, time.monotonic() + 0.5)
    assert 0.5 <= time.monotonic() - start < 10


# ------------------------------------------------------------------------------------------------ supervisor side


def test_the_supervisor_plans_every_replica_with_a_fixed_transitions_port_of_its_own():
    specs = [s for s in plan_children(config("appo", replicas=3, actors=3)) if s.role == "learner"]
    assert [s.name for s in specs] == ["learner-default", "learner-default@1", "learner-default@2"]
    assert specs[0].replica_port == 0 and all(s.replica_port > 0 for s in specs[1:])
    assert len({s.replica_port for s in specs[1:]}) == 2


def ask(
    sets: ReplicaSets, rank: int, generation: int, now: float = 0.0, size: int = 2, store: str = "", trained: int = -2
) -> dict:
    """One replica's `rendezvous`: its store (host:port, by rank unless given), the last generation it was given and
    the last whose state it took (by default the same)."""
    args = {"policy": "default", "rank": rank, "world_size": size, "store": store or f"10.0.0.{rank}:500{rank}"}
    trained = generation if trained == -2 else trained
    ok, error, data = sets.rendezvous({**args, "generation": generation, "trained": trained}, now)
    assert ok, error
    return data


def test_the_first_generation_forms_when_every_replica_has_asked_with_replica_0_first():
    sets = ReplicaSets(config("appo", replicas=3, actors=3))
    assert ask(sets, 2, -1, size=3)["master"] == ""  # the first start waits for all, however long
    assert ask(sets, 1, -1, now=100.0, size=3)["master"] == ""
    formed = ask(sets, 0, -1, now=200.0, size=3)
    assert formed == {"master": "10.0.0.0:5000", "generation": 1, "members": [0, 1, 2]}
    # the others, asking again as they poll, are told the same generation
    assert ask(sets, 2, -1, size=3) == formed and ask(sets, 1, -1, size=3) == formed
    # the same process asking again before it learnt the answer (its store is the same) is told it again
    assert ask(sets, 1, -1, size=3) == formed


def test_a_generation_that_lost_a_member_re_forms_without_it_after_the_window_from_the_one_that_trained_on():
    sets = ReplicaSets(config("appo", replicas=3, actors=3, reform_window_s=2.0))
    for rank in (1, 2, 0):
        ask(sets, rank, -1, size=3)
    # replica 0 is lost (its process ended): the two others time out of their collective and ask, a second apart
    sets.lost("learner-default")
    assert ask(sets, 2, 1, now=50.0, size=3)["master"] == ""
    assert ask(sets, 1, 1, now=51.0, size=3)["master"] == ""
    formed = ask(sets, 2, 1, now=52.0, size=3)  # the window since the first of them asked has passed
    assert formed == {"master": "10.0.0.1:5001", "generation": 2, "members": [1, 2]}
    assert ask(sets, 1, 1, now=52.1, size=3) == formed
    # replica 0 restarted (a store of its own, no generation yet) joins no generation at once: it waits, and the
    # generation's first member hears of it when it probes
    probe = {"policy": "default", "rank": 1, "world_size": 3, "probe": True}
    assert sets.rendezvous(probe, 60.0)[2] == {"generation": 2, "regroup": False}
    assert ask(sets, 0, -1, now=60.0, size=3, store="10.0.0.0:6000")["master"] == ""
    assert ask(sets, 0, -1, now=90.0, size=3, store="10.0.0.0:6000")["master"] == ""  # a joiner opens no window
    assert sets.rendezvous(probe, 90.0)[2] == {"generation": 2, "regroup": True}
    # the members leave together and ask: all three there, the next generation forms from one that trained on
    ask(sets, 2, 2, now=91.0, size=3)
    formed = ask(sets, 1, 2, now=91.0, size=3)
    assert formed == {"master": "10.0.0.1:5001", "generation": 3, "members": [1, 2, 0]}
    assert ask(sets, 0, -1, now=91.2, size=3, store="10.0.0.0:6000") == formed


def test_a_replica_that_never_took_the_groups_state_is_never_its_source():
    """Replica 0 is lost, 1 and 2 go on; the restarted 0 (its checkpoint only) joins generation 3, which fails
    while it meets: in generation 4 the source is still one that trained, not the restarted one of the lowest index."""
    sets = ReplicaSets(config("appo", replicas=3, actors=3, reform_window_s=1.0))
    for rank in (0, 1, 2):
        ask(sets, rank, -1, size=3)
    sets.lost("learner-default")
    ask(sets, 1, 1, now=10.0, size=3)
    assert ask(sets, 2, 1, now=11.5, size=3)["members"] == [1, 2]
    restarted = "10.0.0.0:6000"
    ask(sets, 0, -1, now=20.0, size=3, store=restarted)
    ask(sets, 1, 2, now=20.5, size=3)
    assert ask(sets, 2, 2, now=20.5, size=3)["members"] == [1, 2, 0]
    # generation 3 never met (a member lost while meeting): all three ask again, the restarted one still untrained
    ask(sets, 0, 3, now=30.0, size=3, store=restarted, trained=-1)
    ask(sets, 2, 3, now=30.0, size=3, trained=2)
    formed = ask(sets, 1, 3, now=30.0, size=3, trained=2)
    assert formed["members"] == [1, 2, 0] and formed["master"] == "10.0.0.1:5001"
    # a process restarted again (another store) is not told the generation its predecessor was named in
    assert ask(sets, 0, 3, now=30.1, size=3, store="10.0.0.0:6001", trained=-1)["master"] == ""


def test_replicas_asking_with_different_backends_are_refused_by_name():
    sets = ReplicaSets(config("appo", replicas=2))
    base = {"policy": "default", "world_size": 2, "generation": -1, "trained": -1}
    assert sets.rendezvous({**base, "rank": 0, "store": "h:1", "backend": "nccl"}, 0.0)[0]
    ok, error, _ = sets.rendezvous({**base, "rank": 1, "store": "h:2", "backend": "gloo"}, 0.0)
    assert not ok and "replica_backend the same" in error


def test_a_lost_replica_is_dropped_from_a_generation_still_forming_and_its_actors_feed_the_others():
    sets = ReplicaSets(config("appo", replicas=2))
    for rank in (0, 1):
        name = "learner-default" + (f"@{rank}" if rank else "")
        assert sets.register(name, {"name": name, "endpoints": {"transitions": f"t{rank}"}})
    assert [sets.feeding("default", actor)["name"] for actor in range(4)] == [
        "learner-default",
        "learner-default@1",
        "learner-default",
        "learner-default@1",
    ]
    ask(sets, 0, -1)
    sets.lost("learner-default")  # it was waiting for its group: no generation may meet at its store
    assert ask(sets, 1, -1)["master"] == ""
    assert [sets.feeding("default", actor)["name"] for actor in range(4)] == ["learner-default@1"] * 4
    assert sets.lost("actor-0") is None and replica_rank("learner-default@1") == 1
    formed = ask(sets, 0, -1, store="10.0.0.0:7000")  # restarted: both there now
    assert formed == {"master": "10.0.0.0:7000", "generation": 1, "members": [0, 1]}


@pytest.mark.parametrize(
    "args,words",
    [
        ({"policy": "other", "rank": 0, "world_size": 2}, "has no replicas here"),
        ({"policy": "default", "rank": 2, "world_size": 2}, "ranks 0..1"),
        ({"policy": "default", "rank": True, "world_size": 2}, "ranks 0..1"),
        ({"policy": "default", "rank": 1, "world_size": 3}, "has 2 replicas"),
        ({"policy": "default", "rank": 0, "world_size": 2, "generation": -1}, "needs store"),
        ({"policy": "default", "rank": 0, "world_size": 2, "store": "h:x", "generation": -1}, "needs store"),
        ({"policy": "default", "rank": 0, "world_size": 2.0}, "has 2 replicas"),
        ({"policy": "default", "rank": 0, "world_size": 2, "store": ":1", "generation": -1}, "needs store"),
        ({"policy": "default", "rank": 0, "world_size": 2, "store": "h:70000", "generation": -1}, "needs store"),
        ({"policy": "default", "rank": 0, "world_size": 2, "store": "h:1"}, "generation must be an int"),
        ({"policy": "default", "rank": 0, "world_size": 2, "store": "h:1", "generation": 4}, "in -1..0"),
        ({"policy": "default", "rank": 0, "world_size": 2, "store": "h:1", "generation": -1, "trained": 1}, "trained"),
        (
            {"policy": "default", "rank": 0, "world_size": 2, "store": "h:1", "generation": -1, "backend": "mpi"},
            "backend must be",
        ),
    ],
)
def test_a_rendezvous_that_does_not_fit_the_group_is_refused_with_the_reason(args, words):
    ok, error, _ = ReplicaSets(config("appo")).rendezvous(args, 0.0)
    assert not ok and words in error


def test_replica_settings_that_cannot_work_are_named():
    with pytest.raises(ConfigError, match="every replica needs at least one actor"):
        config("appo", replicas=3, actors=2)
    with pytest.raises(ConfigError, match="collective_timeout_s"):
        config("appo", collective_timeout_s=20.0)
    assert config("appo", remote=True).learner.replicas == 2  # replicas started by hand, elsewhere


def test_the_supervisor_sends_each_actor_to_its_replica_and_the_evaluator_to_replica_0(tmp_path):
    from tandem.daemons.supervisor.supervisor import Supervisor
    from tandem.protocol import ControlRequest

    cfg = config("appo", replicas=2)
    sup = Supervisor(cfg, tmp_path / "config.toml", "tcp://127.0.0.1:1", tmp_path / "logs", plan_children(cfg))
    early = sup.handle(ControlRequest(1, "lookup", {"policy": "default", "actor": 1}), 0.0)
    assert not early.ok and early.code == "not_registered"
    for rank, name in enumerate(("learner-default", "learner-default@1")):
        # replica 0 binds all three sockets; replica 1 its transitions PULL only (replica 0 publishes the weights)
        sockets = ("transitions", "weights", "snapshot")[: 3 if rank == 0 else 1]
        endpoints = {key: f"tcp://127.0.0.1:{1000 * (rank + 1) + i}" for i, key in enumerate(sockets)}
        args = {"name": name, "role": "learner", "policy": "default", "endpoints": endpoints}
        if rank == 0:  # replica 0 without its weights and snapshot endpoints: actors could not follow it
            short = {**args, "endpoints": {"transitions": endpoints["transitions"]}}
            refused = sup.handle(ControlRequest(2, "register", short), 0.0)
            assert not refused.ok and refused.code == "bad_args" and ".weights and .snapshot" in refused.message
        assert sup.handle(ControlRequest(2, "register", args), 0.0).ok
        if rank == 0:  # actor 1's own replica has not registered yet: it is not sent to replica 0 meanwhile
            waiting = sup.handle(ControlRequest(2, "lookup", {"policy": "default", "actor": 1}), 0.0)
            assert not waiting.ok and waiting.code == "not_registered" and "actor 1 feeds" in waiting.message
    nothing = {"name": "learner-default@1", "role": "learner", "policy": "default", "endpoints": {}}
    assert sup.handle(ControlRequest(2, "register", nothing), 0.0).code == "bad_args"
    answers = [sup.handle(ControlRequest(3, "lookup", {"policy": "default", "actor": a}), 0.0) for a in (0, 1, 2)]
    assert [r.data["endpoints"]["transitions"] for r in answers] == [
        "tcp://127.0.0.1:1000",
        "tcp://127.0.0.1:2000",
        "tcp://127.0.0.1:1000",
    ]
    assert {r.data["endpoints"]["weights"] for r in answers} == {"tcp://127.0.0.1:1001"}  # replica 0 publishes
    assert answers[1].data["learner"] == "learner-default@1"
    # how many actors feed each one's replica: an actor's share of replica 0's credit is its replica's batch over them
    assert [r.data["feeders"] for r in answers] == [1, 1, 1]  # config(): two actors, one for each replica
    three = config("appo", replicas=2, actors=3)
    sup.config = three
    answers = [sup.handle(ControlRequest(3, "lookup", {"policy": "default", "actor": a}), 0.0) for a in (0, 1, 2)]
    assert [r.data["feeders"] for r in answers] == [2, 1, 2]
    evaluator = sup.handle(ControlRequest(4, "lookup", {"policy": "default"}), 0.0)
    assert evaluator.data["learner"] == "learner-default" and "feeders" not in evaluator.data
    refused = sup.handle(ControlRequest(5, "rendezvous", {"policy": "default", "rank": 5, "world_size": 2}), 0.0)
    assert not refused.ok and refused.code == "bad_args" and "ranks 0..1" in refused.message


def test_a_hand_started_replica_above_rank_0_must_say_where_it_binds():
    from click.testing import CliRunner

    from tandem.client.cli import cli

    result = CliRunner().invoke(cli, ["learner", "examples/cartpole_appo.toml", "--rank", "1"])
    assert result.exit_code == 2 and "--rank above 0 needs --bind" in result.output


def test_replicas_meet_beyond_loopback_only_on_a_network_said_to_be_trusted():
    from tandem.daemons.learner.replica_join import check_network, interface_of
    from tandem.daemons.settings.setup_errors import SetupError

    check_network("127.0.0.1", trusted=False)  # loopback: nothing leaves the machine
    with pytest.raises(SetupError, match="replicas_trusted_network"):
        check_network("10.213.0.1", trusted=False)
    check_network("10.213.0.1", trusted=True)
    with pytest.raises(SetupError, match="bind one address"):
        check_network("*", trusted=True)
    assert interface_of("127.0.0.1") == "lo"
    with pytest.raises(SetupError, match="no network interface of this host holds"):
        interface_of("192.0.2.77")  # TEST-NET-1: an address no interface here holds


@pytest.mark.parametrize("name", ["appo", "double_dqn"])
def test_a_whole_training_state_crosses_as_safetensors_and_json_and_loads_bit_for_bit(name):
    from tandem.daemons.learner.replica_group import ReplicaGroup
    from tandem.daemons.learner.state_transfer import pack, unpack

    def build(seed: int):
        cfg = config_from_dict(
            {
                "algorithm": {"name": name, "batch_size": 32} if name == "appo" else {"name": name},
                "model": {"hidden_sizes": [16]},
                "run": {"seed": seed},
            }
        )
        return cfg, make_algorithm(cfg, OBS, ACTIONS, "cpu")

    cfg, trained = build(1)
    rng = np.random.default_rng(0)
    for _ in range(3):  # optimizer moments and statistics of its own, beyond the initial weights
        trained.update(appo_payload(cfg, rng) if name == "appo" else dqn_payload(rng))
    data = pack(trained.state_dict())
    assert b"pickle" not in data[:64] and data[:1] != b"\x80"  # safetensors' header, not a pickle stream
    _, fresh = build(2)
    fresh.load_state_dict(unpack(data))
    place = Place(0, 1, 1, "x:1")
    assert ReplicaGroup(place, 1.0, {}).checksum(fresh) == ReplicaGroup(place, 1.0, {}).checksum(trained)
    # and they go on identically: the optimizer's moments came along too. (APPO's minibatch shuffle is no state:
    # replicas seed it alike and draw alike, so here it is set alike, as a group's fresh processes have it.)
    if name == "appo":
        fresh.rng.set_state(trained.rng.get_state())
    payload = appo_payload(cfg, np.random.default_rng(9)) if name == "appo" else dqn_payload(np.random.default_rng(9))
    trained.update(payload)
    fresh.update(payload)
    assert {k: v.tobytes() for k, v in fresh.weights().items()} == {
        k: v.tobytes() for k, v in trained.weights().items()
    }
    with pytest.raises(ValueError, match="not a packed algorithm state"):
        unpack(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")


def test_replicas_on_a_machine_with_several_gpus_take_one_each_when_the_device_is_plain_cuda(monkeypatch):
    from tandem.daemons.learner.replica_parts import replica_device

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert [replica_device("cuda", rank) for rank in range(5)] == ["cuda", "cuda:1", "cuda:2", "cuda:3", "cuda:0"]
    assert replica_device("cuda:2", 1) == "cuda:2" and replica_device("cpu", 3) == "cpu"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert replica_device("cuda", 1) == "cuda"  # one GPU: shared


def test_replica_0_alone_holds_the_group_duties():
    from tandem.daemons.learner.replica_parts import Duties, duties_of
    from tandem.daemons.settings.schema import LearnerSection
    from tandem.daemons.settings.setup_errors import SetupError

    learner = LearnerSection(replicas=3, pool_every=5)
    assert duties_of(0, learner) == Duties(checkpoints=True, publishes=True, pool_every=5)
    assert duties_of(2, learner) == Duties(checkpoints=False, publishes=False, pool_every=0)
    with pytest.raises(SetupError, match="replica rank 3 is outside 0..2"):
        duties_of(3, learner)


def test_a_replica_above_0_holds_no_publishing_parts(tmp_path):
    """No weights PUB, no snapshot ROUTER or thread, no version floor: replica 0 publishes for the group."""
    from tandem.daemons.learner.publisher import Publisher
    from tandem.daemons.learner.replica_parts import Unpublished
    from tandem.daemons.runtime.names import learner_name

    first = build_replica(tmp_path, 0)
    second = build_replica(tmp_path, 1)
    try:
        assert isinstance(first.publisher, Publisher) and first.binding.weights_pub is not None
        assert set(first.binding.endpoints) == {"transitions", "weights", "snapshot"}
        assert isinstance(second.publisher, Unpublished)
        assert second.binding.weights_pub is None and second.binding.snapshot_router is None
        assert set(second.binding.endpoints) == {"transitions"}
        assert second.runtime.name == learner_name("default", 1) and not second.duties.checkpoints
        with pytest.raises(RuntimeError, match="replica 0 publishes"):
            second.publisher.send([])
    finally:
        for learner in (first, second):
            learner.metrics.close()
            learner.runtime.ctx.destroy(linger=0)


def build_replica(tmp_path, rank: int):
    """Replica `rank` of a group of 2, built and bound on loopback (the group is not formed)."""
    from tandem.daemons.learner.daemon import Learner
    from tandem.daemons.runtime.signals import StopFlag
    from tandem.daemons.supervisor.ports import fix_ports, free_port

    cfg = fix_ports(config("appo", replicas=2))
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, dir=str(tmp_path)))
    port = free_port("127.0.0.1") if rank else 0
    learner = Learner(cfg, "default", StopFlag(), control_endpoint=None, rank=rank, replica_port=port)
    learner.build()
    learner.binding.bind()
    return learner


def test_the_group_backend_is_gloo_on_the_cpu_and_nccl_is_refused_there_by_name():
    from tandem.daemons.learner.replica_join import backend_for
    from tandem.daemons.settings.setup_errors import SetupError

    cpu = torch.device("cpu")
    assert (
        backend_for("auto", cpu) == "gloo"
        and backend_for("gloo", cpu) == "gloo"
        and backend_for("auto", None) == "gloo"
    )
    with pytest.raises(SetupError, match="replica_backend = 'nccl' needs learners on CUDA devices"):
        backend_for("nccl", cpu)
    with pytest.raises(ConfigError, match="replica_backend"):
        config("appo", replica_backend="mpi")
