"""Three replicas of one policy on three hosts (two network namespaces and the test's own, joined by a bridge):
they train together with identical weights, each fed by its own actor; one killed, the other two re-form the group
across the hosts without it, in the same processes, and take it back when it is started again by hand."""

from __future__ import annotations

import os
import random
import signal

import pytest

from tandem.client.netns import Hosts, NetnsError
from tests.system.test_multihost import start_learner_in, stop_learner
from tests.system.test_supervisor import Run, rows


@pytest.fixture
def three_hosts():
    """(head address, [(namespace, address), (namespace, address)]): two namespaces and a bridge to this one, made
    here and removed afterwards."""
    try:
        with Hosts(2) as hosts:
            yield hosts.head, hosts.places
    except NetnsError as exc:
        pytest.skip(str(exc))


@pytest.mark.timeout(300)
def test_three_replicas_on_three_hosts_train_together_and_re_form_without_a_killed_one(tmp_path, three_hosts):
    head, (first, second) = three_hosts
    names = ("learner-default", "learner-default@1", "learner-default@2")
    run = Run(
        tmp_path,
        [
            "actors.count=3",
            "learner.remote=true",
            "learner.replicas=3",
            "learner.replicas_trusted_network=true",
            "learner.replica_check_every=5",
            "learner.collective_timeout_s=3",
            "learner.reform_window_s=1",
            f"transport.host='{head}'",
        ],
        flags=("--insecure",),
    )
    places = [first, second, (None, head)]  # rank 0 and rank 1 in the namespaces, rank 2 on the head
    # replica 1, restarted below, binds a fixed port as the guide asks of a hand-started replica above 0: its actor
    # sends to it there again (a namespace of its own has nothing else listening)
    fixed = str(random.randrange(20000, 40000))
    learners = {}
    try:
        for rank, (ns, address) in enumerate(places):
            port = fixed if rank == 1 else "*"
            learners[rank] = start_learner_in(ns, address, tmp_path, run.endpoint, rank=rank, port=port)

        def counters(d, name) -> dict:
            return rows(d).get(name, {}).get("counters", {})

        def all_trained(d, least: int = 30, members: int = 3) -> bool:
            return all(
                (counters(d, name).get("updates") or 0) > least
                and counters(d, name).get("replicas") == members
                and counters(d, name).get("replica_checks", 0) >= 2
                for name in names
            )

        data = run.wait(all_trained, 180, "three replicas training together across three hosts")
        for name in names:
            assert counters(data, name)["replica_mismatches"] == 0
        assert len({counters(data, name)["replica_generation"] for name in names}) == 1
        # each actor feeds the replica of its index, on that replica's host; all take replica 0's weights
        found = [
            run.channel.request("lookup", {"policy": "default", "actor": a}, timeout_s=5).data["endpoints"]
            for a in range(3)
        ]
        for actor, (_, address) in enumerate(places):
            assert found[actor]["transitions"].startswith(f"tcp://{address}:"), found
        assert {f["weights"] for f in found} == {found[0]["weights"]}

        # replica 1 is lost on its host: the two others re-form across the link without it and train on
        generation = counters(data, names[0])["replica_generation"]
        updates = counters(data, names[0])["updates"]
        os.killpg(learners[1].pid, signal.SIGKILL)
        learners[1].wait(10)

        def two_train_on(d) -> bool:
            return all(
                counters(d, name).get("replicas") == 2
                and counters(d, name).get("replica_generation", 0) > generation
                and (counters(d, name).get("updates") or 0) > updates + 10
                for name in (names[0], names[2])
            )

        data = run.wait(two_train_on, 60, "the two left training on as a group of two")
        assert all(learners[rank].poll() is None for rank in (0, 2))  # the same processes, not restarted
        # started again on its host (as systemd or a StatefulSet would): it joins the group that trained on
        learners[1] = start_learner_in(second[0], second[1], tmp_path, run.endpoint, rank=1, port=fixed)
        data = run.wait(
            lambda d: all_trained(d, least=updates + 20), 120, "replica 1 back, and the three training together"
        )
        for name in names:
            assert counters(data, name)["replica_mismatches"] == 0
        assert all(counters(data, names[rank])["replica_reforms"] >= 1 for rank in (0, 2))  # the same processes
    finally:
        for learner in learners.values():
            stop_learner(learner)
        run.close()
