"""Two replicas of one APPO policy, each with its actors on a host of its own (network namespaces joined by a
bridge), every daemon started by hand as on separate machines: they train CartPole to solved together, their
weights compared bit for bit as they go, each actor feeding the replica on its own host."""

from __future__ import annotations

import pytest

from tandem.client.bench.replicas_solve import CHECK_EVERY, solve_on_hosts, spread
from tandem.client.netns import Hosts, NetnsError
from tests.system.harness import ROOT


@pytest.fixture
def can_make_hosts():
    try:
        with Hosts(1):
            pass
    except NetnsError as exc:
        pytest.skip(str(exc))


def test_actors_are_spread_by_the_replica_they_feed():
    assert spread(5, 2) == [[0, 2, 4], [1, 3]]
    assert spread(3, 3) == [[0], [1], [2]]


@pytest.mark.timeout(240)
def test_two_replicas_and_their_actors_on_two_hosts_train_appo_to_solved(can_make_hosts):
    figures = solve_on_hosts(ROOT / "examples" / "cartpole_appo.toml", 2, 3, 150.0, ("run.seed=1",))
    assert figures["solved"], figures
    assert figures["eval_return"] >= 475.0 and figures["weight_mismatches"] == 0, figures
    # every replica compared its weights, once each CHECK_EVERY updates (a run that solves within 10 updates has
    # compared once: the count follows the updates, read from the same replica's heartbeat, one check behind at most)
    checks, updates = figures["weight_checks"], figures["updates"]
    assert all(c >= max(1, u // CHECK_EVERY - 1) for c, u in zip(checks, updates)), figures
    assert len(set(updates)) <= 2, figures
    assert figures["generations"] == [1], figures  # one group from start to solved: nobody lost
    assert all(received > 0 for received in figures["batches_received"]), figures  # every replica was fed
    # the supervisor sends actors 0 and 2 to replica 0 on the first host, actor 1 to replica 1 on the second
    first, second = figures["hosts"]
    feeds = [endpoint.removeprefix("tcp://").rsplit(":", 1)[0] for endpoint in figures["actors_feed"]]
    assert feeds == [first, second, first], figures
