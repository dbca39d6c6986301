"""A learner replica joining its group through the supervisor: replica 0 opens a store and posts where; the others ask.

The wait is bounded (`learner.rendezvous_timeout_s`) and heartbeats go on through it, in stage `rendezvous`:
torch's own rendezvous blocks, so it runs on a thread while this one reports and watches the stop flag. The
replicas first meet at a counter in the generation's store, with that whole bound, so that Gloo's shorter
connection wait (the collective timeout) starts only once every replica is there.
"""

from __future__ import annotations

import datetime
import os
import threading
import time
from typing import Any

from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.replica_group import Place, ReplicaGroup
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.endpoints import is_loopback
from tandem.daemons.settings.setup_errors import SetupError

ASK_EVERY_S = 0.2  # between two questions of a replica waiting for replica 0's address
REPORT_EVERY_S = 0.1  # between two looks at the rendezvous thread (and heartbeats)
ARRIVAL_POLL_S = 0.05  # between two looks at how many replicas reached the generation's store
NCCL_WATCHDOG_GRACE_S = 5.0  # NCCL's watchdog aborts this long after the group's own wait has given up
ARRIVED_KEY = "tandem-arrived"  # a counter in each generation's store, beside torch's own keys


def join_group(
    runtime: DaemonRuntime,
    policy: str,
    rank: int,
    world_size: int,
    host: str,
    learner: Any,
    counts: dict[str, float],
    device: Any = None,
) -> ReplicaGroup:
    """This replica's place in `policy`'s group, formed with every other replica (on `device`, the torch device it
    trains on: NCCL where that is a GPU); ReplicaError if it cannot be."""
    if runtime.channel is None:
        raise SetupError(
            "learner.replicas > 1 needs a supervisor to meet through (`tandem up`, or --control of a supervisor)"
        )
    runtime.reporter.set_stage("rendezvous")
    deadline = time.monotonic() + learner.rendezvous_timeout_s
    check_network(host, learner.replicas_trusted_network)
    backend = backend_for(learner.replica_backend, device)
    if backend == "nccl":
        device = indexed(device)
    # Gloo's and NCCL's own links go out of the interface that holds this address (by default they pick by hostname)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", interface_of(host))
    os.environ.setdefault("NCCL_SOCKET_IFNAME", interface_of(host))
    import torch.distributed as dist

    store_timeout = datetime.timedelta(seconds=learner.rendezvous_timeout_s)
    store: Any = None
    if rank == 0:
        store = dist.TCPStore(host, 0, world_size, is_master=True, wait_for_workers=False, timeout=store_timeout)
        data = post_first(runtime, policy, world_size, f"{host}:{store.port}", deadline)
    else:
        data = wait_for_first(runtime, policy, rank, world_size, deadline)
    place = Place(rank, world_size, int(data["generation"]), str(data["master"]), backend)
    outcome: dict[str, BaseException | None] = {}

    def form() -> None:
        try:
            nonlocal store
            if store is None:
                address, _, port = place.master.rpartition(":")
                store = dist.TCPStore(address, int(port), world_size, is_master=False, timeout=store_timeout)
            generation_store = dist.PrefixStore(f"tandem/{policy}/{place.generation}", store)
            wait_for_everyone(generation_store, world_size, deadline)
            options: dict[str, Any] = {}
            timeout_s = learner.collective_timeout_s
            if backend == "nccl":
                # the group's own bounded wait names the failure first; NCCL's watchdog is the backstop behind it
                options["device_id"] = device
                timeout_s += NCCL_WATCHDOG_GRACE_S
            dist.init_process_group(
                backend,
                store=generation_store,
                rank=rank,
                world_size=world_size,
                timeout=datetime.timedelta(seconds=timeout_s),
                **options,
            )
            outcome["error"] = None
        except BaseException as exc:  # reported on the daemon's thread
            outcome["error"] = exc

    thread = threading.Thread(target=form, name="replica-rendezvous", daemon=True)
    thread.start()
    while thread.is_alive():
        runtime.reporter.tick()
        if runtime.stop:
            raise ReplicaError(f"stopped while replica {rank} of policy {policy!r} waited for its group")
        if time.monotonic() > deadline:
            raise ReplicaError(
                f"replica {rank} of policy {policy!r}: the group of {world_size} did not form within "
                f"learner.rendezvous_timeout_s ({learner.rendezvous_timeout_s:g} s)"
            )
        thread.join(REPORT_EVERY_S)
    if outcome.get("error") is not None:
        exc = outcome["error"]
        raise ReplicaError(f"replica {rank} of policy {policy!r} could not join its group: {type(exc).__name__}: {exc}")
    return ReplicaGroup(
        place,
        learner.collective_timeout_s,
        counts,
        learner.replica_check_every,
        device=device,
        bucket_bytes=learner.allreduce_bucket_kb * 1024,
        overlap=learner.allreduce_overlap,
    )


def indexed(device: Any) -> Any:
    """A CUDA device with its index ('cuda' is the current one): NCCL binds a communicator to one device."""
    import torch

    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


def backend_for(wanted: str, device: Any) -> str:
    """The group's torch.distributed backend: NCCL for learners on CUDA devices where it is built in, else Gloo."""
    import torch.distributed as dist

    on_gpu = device is not None and getattr(device, "type", "cpu") == "cuda"
    if wanted == "nccl":
        if not on_gpu:
            raise SetupError(
                "learner.replica_backend = 'nccl' needs learners on CUDA devices (learner.device = 'cuda'): "
                "use 'gloo' (or 'auto') for learners on the CPU"
            )
        if not dist.is_nccl_available():
            raise SetupError("learner.replica_backend = 'nccl': this torch build has no NCCL; use 'gloo' or 'auto'")
        return "nccl"
    if wanted == "auto" and on_gpu and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def wait_for_everyone(store: Any, world_size: int, deadline: float) -> None:
    """Count this replica in at its generation's store, then wait (until `deadline`) for all to be counted.

    Gloo's own connection wait is the collective timeout, which is short on purpose; a replica restarted with
    its group can take longer than that to start (the hung one it replaces is still being killed), and each
    miss would end replica 0 as a failure, towards a crash loop. Once all are counted, Gloo connects at once."""
    store.add(ARRIVED_KEY, 1)
    while store.add(ARRIVED_KEY, 0) < world_size:
        if time.monotonic() > deadline:
            return  # join_group's own look at the deadline names the failure
        time.sleep(ARRIVAL_POLL_S)


def check_network(host: str, trusted: bool) -> None:
    """The replicas' own traffic is unencrypted: beyond loopback only where the config says the network is trusted."""
    if host in ("*", "0.0.0.0", "::", ""):
        raise SetupError(
            f"a replica binding {host or 'no address'!r} cannot tell the others where to meet it: bind one address "
            "(--bind tcp://ADDRESS:PORT)"
        )
    if not is_loopback(f"tcp://{host}:0") and not trusted:
        raise SetupError(
            f"replicas meeting on {host} (beyond loopback) would send gradients and their store's keys unencrypted "
            "and unauthenticated (torch.distributed's Gloo): set learner.replicas_trusted_network = true only on a "
            "network you trust"
        )


def interface_of(host: str) -> str:
    """The name of the network interface that holds `host` ('lo' for loopback)."""
    import ipaddress
    import socket

    import psutil

    try:
        wanted = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError) as exc:
        raise SetupError(f"replica address {host!r} does not resolve: {exc}") from exc
    if wanted.is_loopback:
        return "lo"
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == str(wanted) for a in addresses if a.family == socket.AF_INET):
            return name
    raise SetupError(f"no network interface of this host holds {host} ({wanted}): bind an address of this host")


def ask(runtime: DaemonRuntime, policy: str, rank: int, world_size: int, master: str | None = None) -> dict:
    """One `rendezvous` request; ReplicaError when the supervisor refuses it (a config that does not match)."""
    from tandem.daemons.runtime.control_channel import ControlTimeout

    args: dict[str, Any] = {"policy": policy, "rank": rank, "world_size": world_size}
    if master is not None:
        args["master"] = master
    try:
        reply = runtime.channel.request("rendezvous", args, timeout_s=2.0)
    except ControlTimeout:
        return {"master": "", "generation": 0}
    if not reply.ok:
        raise ReplicaError(f"the supervisor refused replica {rank} of policy {policy!r}: {reply.message}")
    return dict(reply.data)


def post_first(runtime: DaemonRuntime, policy: str, world_size: int, master: str, deadline: float) -> dict:
    """Replica 0: post where its store listens, until the supervisor has taken it (a new generation)."""
    while True:
        data = ask(runtime, policy, 0, world_size, master)
        if data.get("master") == master:
            return data
        runtime.reporter.tick()
        if runtime.stop or time.monotonic() > deadline:
            raise ReplicaError(f"replica 0 of policy {policy!r} could not post its address to the supervisor")
        time.sleep(ASK_EVERY_S)


def wait_for_first(runtime: DaemonRuntime, policy: str, rank: int, world_size: int, deadline: float) -> dict:
    """Ask until replica 0 has posted its address (heartbeating meanwhile)."""
    while True:
        data = ask(runtime, policy, rank, world_size)
        if data.get("master"):
            return data
        runtime.reporter.tick()
        if runtime.stop:
            raise ReplicaError(f"stopped while replica {rank} of policy {policy!r} waited for replica 0")
        if time.monotonic() > deadline:
            raise ReplicaError(f"replica 0 of policy {policy!r} posted no address within learner.rendezvous_timeout_s")
        time.sleep(ASK_EVERY_S)
