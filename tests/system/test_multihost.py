"""Two hosts in network namespaces: the head runs the supervisor and actors, a learner joins from the other."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest

from tests.system.harness import ROOT
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
        for args in (("link", "add", head_if, "type", "veth", "peer", "name", gpu_if),
                     ("link", "set", gpu_if, "netns", ns),
                     ("addr", "add", f"{head}/30", "dev", head_if), ("link", "set", head_if, "up"),
                     ("-n", ns, "addr", "add", f"{gpu}/30", "dev", gpu_if), ("-n", ns, "link", "set", gpu_if, "up"),
                     ("-n", ns, "link", "set", "lo", "up")):
            done = ip(*args)
            if done.returncode != 0:
                pytest.skip(f"cannot wire two namespaces here (ip {' '.join(args)}): {done.stderr.strip()}")
        yield head, ns, gpu
    finally:
        ip("link", "del", head_if)  # removes both ends, if the namespace still holds one
        ip("netns", "del", ns)


def test_a_learner_on_another_host_joins_and_trains(tmp_path, two_hosts):
    head, ns, gpu = two_hosts
    run = Run(tmp_path, ["actors.count=1", "learner.remote=true", f"transport.host='{head}'"], flags=("--insecure",))
    learner = None
    try:
        assert run.endpoint.startswith(f"tcp://{head}:"), run.endpoint
        run.wait(lambda d: rows(d)["actor-0"]["stage"] == "connect", 60, "the actor waiting for a learner")
        log = (tmp_path / "learner.log").open("ab")
        # The learner's address exists only inside its namespace: nothing can reach it over loopback by accident.
        learner = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "client", "learner", str(tmp_path / "run" / "config.toml"),
             "--join", run.endpoint, "--bind", f"tcp://{gpu}:*", "--insecure"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        log.close()

        def trained(d) -> bool:
            row = rows(d).get("learner-default", {})
            return (row.get("state") == "REMOTE" and rows(d)["actor-0"]["state"] == "RUNNING"
                    and (row.get("counters", {}).get("updates") or 0) > 20)

        data = run.wait(trained, 90, "the joined learner training on the head's transitions")
        policy = data["policies"][0]
        assert policy["insecure"] is True
        # Actors were sent to the learner's own host's address: the only way the transitions could arrive.
        found = run.channel.request("lookup", {"policy": "default"}, timeout_s=5).data["endpoints"]
        assert all(found[k].startswith(f"tcp://{gpu}:") for k in ("transitions", "weights", "snapshot")), found
        version = rows(data)["actor-0"]["version"]
        assert version is not None and version >= 0
    finally:
        if learner is not None:
            if learner.poll() is None:
                os.killpg(learner.pid, signal.SIGTERM)
            try:
                learner.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(learner.pid, signal.SIGKILL)
                learner.wait(timeout=5)
        run.close()
