"""Two hosts in network namespaces: the head runs the supervisor and actors, a learner joins from the other."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest

from tandem.client.harness import end_group
from tests.system.harness import join_learner
from tests.system.test_supervisor import Run, rows

# A private /30 unlikely to be in use; the head keeps .1 in the test's own namespace, the "GPU host" has .2.
SUBNET = "10.213.{}.{}"


def ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)


@pytest.fixture
def two_hosts():
    """(head address, gpu namespace, gpu address): a namespace and a veth pair made here, removed afterwards."""
    tag = f"{os.getpid() % 10000}{random.randrange(100)}"
    ns, head_if, gpu_if = f"tandem-gpu-{tag}", f"th{tag}", f"tg{tag}"
    third = random.randrange(1, 250)
    head, gpu = SUBNET.format(third, 1), SUBNET.format(third, 2)
    made = ip("netns", "add", ns)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
    try:
        for args in (
            ("link", "add", head_if, "type", "veth", "peer", "name", gpu_if),
            ("link", "set", gpu_if, "netns", ns),
            ("addr", "add", f"{head}/30", "dev", head_if),
            ("link", "set", head_if, "up"),
            ("-n", ns, "addr", "add", f"{gpu}/30", "dev", gpu_if),
            ("-n", ns, "link", "set", gpu_if, "up"),
            ("-n", ns, "link", "set", "lo", "up"),
        ):
            done = ip(*args)
            if done.returncode != 0:
                pytest.skip(f"cannot wire two namespaces here (ip {' '.join(args)}): {done.stderr.strip()}")
        yield head, ns, gpu, head_if
    finally:
        ip("link", "del", head_if)  # removes both ends, if the namespace still holds one
        ip("netns", "del", ns)


def start_learner_in(
    ns: str | None, address: str, tmp_path, control: str, insecure: bool = True, rank: int = 0, port: str = "*"
) -> subprocess.Popen:
    """A learner inside namespace `ns` (None: the test's own, the head's), bound to `address`, which only that
    namespace has: nothing can reach it over loopback by accident. `rank`: a data-parallel replica; `port`: its
    transitions port, fixed for one that is restarted (its actors find it there again)."""
    return join_learner(
        tmp_path,
        control,
        f"tcp://{address}:{port}",
        f"learner-{rank}.log",
        *(["--insecure"] if insecure else []),
        *(["--rank", str(rank)] if rank else []),
        wrap=["ip", "netns", "exec", ns] if ns else [],
    )


def stop_learner(learner: subprocess.Popen | None) -> None:
    if learner is not None:
        end_group(learner, 15)


def test_a_learner_on_another_host_joins_and_trains(tmp_path, two_hosts):
    head, ns, gpu, _ = two_hosts
    run = Run(tmp_path, ["actors.count=1", "learner.remote=true", f"transport.host='{head}'"], flags=("--insecure",))
    learner = None
    try:
        assert run.endpoint.startswith(f"tcp://{head}:"), run.endpoint
        run.wait(lambda d: rows(d)["actor-0"]["stage"] == "connect", 60, "the actor waiting for a learner")
        learner = start_learner_in(ns, gpu, tmp_path, run.endpoint)

        def trained(d) -> bool:
            row = rows(d).get("learner-default", {})
            return (
                row.get("state") == "REMOTE"
                and rows(d)["actor-0"]["state"] == "RUNNING"
                and (row.get("counters", {}).get("updates") or 0) > 20
            )

        data = run.wait(trained, 90, "the joined learner training on the head's transitions")
        policy = data["policies"][0]
        assert policy["insecure"] is True
        # Actors were sent to the learner's own host's address: the only way the transitions could arrive.
        found = run.channel.request("lookup", {"policy": "default"}, timeout_s=5).data["endpoints"]
        assert all(found[k].startswith(f"tcp://{gpu}:") for k in ("transitions", "weights", "snapshot")), found
        version = rows(data)["actor-0"]["version"]
        assert version is not None and version >= 0
    finally:
        stop_learner(learner)
        run.close()


@pytest.mark.timeout(300)  # six restarts and a cut link: well over the default 120 s on a loaded 2-core machine
def test_killed_actors_and_a_cut_link_never_abort_a_remote_learner(tmp_path, two_hosts):
    """Between hosts ZMTP heartbeats are on (PROTOCOL.md, Sockets): libzmq 4.3.x aborted a learner
    (`Assertion failed: !_io_error`) when a heartbeating peer vanished. SIGKILL the actors over and over, then
    take the link down past the heartbeat timeout and up again: the learner lives on and trains again."""
    head, ns, gpu, head_if = two_hosts
    run = Run(
        tmp_path,
        ["actors.count=2", "learner.remote=true", f"transport.host='{head}'", "supervisor.liveness_timeout_s=30"],
        flags=("--insecure",),
    )
    learner = None
    try:
        learner = start_learner_in(ns, gpu, tmp_path, run.endpoint)

        def updates(d) -> int:
            return rows(d).get("learner-default", {}).get("counters", {}).get("updates") or 0

        def all_running(d) -> bool:
            return all(rows(d)[f"actor-{i}"]["state"] == "RUNNING" for i in range(2))

        data = run.wait(lambda d: updates(d) > 20 and all_running(d), 120, "the remote learner training")
        for round_ in range(6):  # both actors, three times each, killed mid-send
            name = f"actor-{round_ % 2}"
            pid = rows(data)[name]["pid"]
            os.kill(pid, signal.SIGKILL)
            data = run.wait(
                lambda d, name=name, pid=pid: rows(d)[name]["pid"] not in (None, pid) and all_running(d),
                60,
                f"{name} back after SIGKILL {round_ + 1}",
            )
        assert learner.poll() is None, (tmp_path / "learner-0.log").read_text()[-2000:]

        def received(d) -> int:
            return rows(d).get("learner-default", {}).get("counters", {}).get("batches_received") or 0

        status = run.wait(lambda d: received(d) > 0, 10, "the learner's counters")
        before, before_batches = updates(status), received(status)
        # Cut the wire for longer than the heartbeat timeout (5 s): both ends see their peers die, and the actors'
        # reconnects begin while the link is down (routed elsewhere: CONNECT_TIMEOUT makes them try again).
        assert ip("link", "set", head_if, "down").returncode == 0
        time.sleep(8)
        assert ip("link", "set", head_if, "up").returncode == 0
        run.wait(
            lambda d: received(d) > before_batches + 20 and updates(d) > before + 20 and all_running(d),
            60,
            "batches and training again after the link came back",
        )
        assert learner.poll() is None, (tmp_path / "learner-0.log").read_text()[-2000:]
        assert "Assertion failed" not in (tmp_path / "learner-0.log").read_text()
    finally:
        stop_learner(learner)
        run.close()


def test_a_remote_learner_trains_over_curve_with_no_insecure_flag(tmp_path, two_hosts):
    """Keys instead of --insecure: the supervisor, the learner in the other namespace and the actors all use
    CurveZMQ on the links between the hosts; status says so."""
    from tandem.daemons.runtime.control_channel import ControlChannel
    from tandem.daemons.security import keystore
    from tandem.protocol.sockets import CurveKeys, SocketOptions

    head, ns, gpu, _ = two_hosts
    keys = tmp_path / "keys"
    keystore.create(keys, "host")  # one keypair for both hosts here; deploy/README.md shows one per host
    run = Run(
        tmp_path, ["actors.count=1", "learner.remote=true", f"transport.host='{head}'", f"security.key_dir='{keys}'"]
    )
    learner = None
    try:
        run.channel.close()
        host = keystore.load_keypair(keys, "host")
        run.channel = ControlChannel(run.ctx, run.endpoint, SocketOptions(curve=CurveKeys(*host, host[0])))
        learner = start_learner_in(ns, gpu, tmp_path, run.endpoint, insecure=False)
        data = run.wait(
            lambda d: (
                (rows(d).get("learner-default", {}).get("counters", {}).get("updates") or 0) > 20
                and rows(d)["actor-0"]["state"] == "RUNNING"
            ),
            120,
            "training over CURVE between the hosts",
        )
        policy = data["policies"][0]
        assert policy["link"] == "curve" and policy["insecure"] is False and data["control_link"] == "curve", data
    finally:
        stop_learner(learner)
        run.close()


def test_two_replicas_on_two_hosts_train_one_policy_together(tmp_path, two_hosts):
    """learner.replicas = 2 started by hand: replica 0 on the GPU host, replica 1 on the head; they meet through
    the supervisor, average gradients across the hosts' link, and each trains on its own actor's data."""
    head, ns, gpu, _ = two_hosts
    run = Run(
        tmp_path,
        [
            "actors.count=2",
            "learner.remote=true",
            "learner.replicas=2",
            "learner.replicas_trusted_network=true",
            "learner.replica_check_every=10",
            "learner.collective_timeout_s=5",
            f"transport.host='{head}'",
        ],
        flags=("--insecure",),
    )
    learners = []
    try:
        learners.append(start_learner_in(ns, gpu, tmp_path, run.endpoint))
        learners.append(start_learner_in(None, head, tmp_path, run.endpoint, rank=1))

        def counters(d, name) -> dict:
            return rows(d).get(name, {}).get("counters", {})

        def both_trained(d) -> bool:
            return all(
                (counters(d, name).get("updates") or 0) > 30 and counters(d, name).get("replica_checks", 0) >= 2
                for name in ("learner-default", "learner-default@1")
            )

        data = run.wait(both_trained, 150, "both replicas training together across the two hosts")
        first, second = counters(data, "learner-default"), counters(data, "learner-default@1")
        assert first["replica_mismatches"] == 0 and second["replica_mismatches"] == 0
        assert second["replica_rank"] == 1 and first["replica_generation"] == second["replica_generation"]
        assert first["gradient_allreduce_s"] > 0 and second["gradient_allreduce_s"] > 0
        # each actor feeds the replica on its own side of the link; both take replica 0's weights
        found = [
            run.channel.request("lookup", {"policy": "default", "actor": a}, timeout_s=5).data["endpoints"]
            for a in (0, 1)
        ]
        assert found[0]["transitions"].startswith(f"tcp://{gpu}:") and found[1]["transitions"].startswith(
            f"tcp://{head}:"
        )
        assert found[0]["weights"] == found[1]["weights"] and found[0]["weights"].startswith(f"tcp://{gpu}:")
    finally:
        for learner in learners:
            stop_learner(learner)
        run.close()
