"""A learner replica joining a generation of its group through the supervisor, at its start and whenever the
group re-forms.

Every replica opens a torch.distributed store of its own and asks the supervisor (`rendezvous`) for the next
generation, giving that store's address and the last generation it was given; the supervisor answers with the
generation's members (the source of its state first) and the store where it meets (its first member's). The
wait is bounded (`learner.rendezvous_timeout_s`) and heartbeats go on through it, in stage `rendezvous`: torch's
own rendezvous blocks, so it runs on a thread while this one reports and watches the stop flag. The members
first meet at a counter in the generation's store, so that Gloo's shorter connection wait (the collective
timeout) starts only once every member is there: at the group's first start for as long as the rendezvous
timeout (a sibling may start slowly), when it re-forms for the collective timeout (the members are all
running). A generation that does not form (a member lost meanwhile) is followed by the next one.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from typing import Any

from tandem.daemons.learner.replica_error import ReplicaError
from tandem.daemons.learner.replica_group import Place, ReplicaGroup
from tandem.daemons.runtime.daemon_runtime import DaemonRuntime
from tandem.daemons.runtime.endpoints import is_loopback
from tandem.daemons.settings.setup_errors import SetupError

log = logging.getLogger(__name__)

ASK_EVERY_S = 0.2  # between two questions of a replica waiting for its generation
REPORT_EVERY_S = 0.1  # between two looks at the rendezvous thread (and heartbeats)
ARRIVAL_POLL_S = 0.05  # between two looks at how many replicas reached the generation's store
PROBE_TIMEOUT_S = 0.5  # a probe asked from the training loop costs at most this
NCCL_WATCHDOG_GRACE_S = 5.0  # NCCL's watchdog aborts this long after the group's own wait has given up
ARRIVED_KEY = "tandem-arrived"  # a counter in each generation's store, beside torch's own keys


class Meeting:
    """This replica's side of its group's rendezvous: its own store, the last generation it was given, and the
    way into the next one."""

    def __init__(
        self,
        runtime: DaemonRuntime,
        policy: str,
        rank: int,
        world_size: int,
        host: str,
        learner: Any,
        counts: dict[str, float],
        device: Any = None,
    ):
        if runtime.channel is None:
            raise SetupError(
                "learner.replicas > 1 needs a supervisor to meet through (`tandem up`, or --control of a supervisor)"
            )
        self.runtime, self.policy, self.rank, self.world_size = runtime, policy, rank, world_size
        self.learner, self.counts = learner, counts
        check_network(host, learner.replicas_trusted_network)
        self.backend = backend_for(learner.replica_backend, device)
        self.device = indexed(device) if self.backend == "nccl" else device
        # Gloo's and NCCL's own links go out of the interface that holds this address (by default: by hostname)
        interface = interface_of(host)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", interface)
        # NCCL's watchdog, on a collective past its timeout, aborts the communicator and leaves the process alive
        # (2), so the group's own wait fails it and the replica re-forms instead of being torn down (1, 3)
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
        import torch.distributed as dist

        self.store_timeout = datetime.timedelta(seconds=learner.rendezvous_timeout_s)
        self.store = dist.TCPStore(
            host, 0, world_size, is_master=True, wait_for_workers=False, timeout=self.store_timeout
        )
        self.address = f"{host}:{self.store.port}"
        self.generation = -1  # the last generation this replica was given (-1: none yet)
        self.trained = -1  # the last generation whose state it took (-1: none: fresh, or its own checkpoint)
        self.stuck = False  # a thread forming a generation never returned: no other can be formed here

    def join(self) -> ReplicaGroup:
        """The next generation of the group, formed with every member the supervisor named; ReplicaError when none
        forms within learner.rendezvous_timeout_s or the learner is stopping."""
        self.runtime.reporter.set_stage("rendezvous")
        deadline = time.monotonic() + self.learner.rendezvous_timeout_s
        while True:
            data = self.next_generation(deadline)
            self.generation = int(data["generation"])
            try:
                return self.form(data, deadline)
            except ReplicaError as exc:
                if self.runtime.stop or self.stuck or time.monotonic() > deadline:
                    raise
                log.warning(
                    "generation %d of policy %s did not form (%s); asking for the next",
                    self.generation,
                    self.policy,
                    exc,
                )

    def next_generation(self, deadline: float) -> dict:
        """Ask until the supervisor names a generation this replica is a member of (heartbeating meanwhile)."""
        while True:
            data = self.ask(
                {"store": self.address, "generation": self.generation, "trained": self.trained, "backend": self.backend}
            )
            if data.get("master") and self.rank in data.get("members", ()):
                return data
            self.runtime.reporter.tick()
            if self.runtime.stop:
                raise ReplicaError(f"stopped while replica {self.rank} of policy {self.policy!r} waited for its group")
            if time.monotonic() > deadline:
                raise ReplicaError(
                    f"replica {self.rank} of policy {self.policy!r}: no generation of its group formed within "
                    f"learner.rendezvous_timeout_s ({self.learner.rendezvous_timeout_s:g} s)"
                )
            time.sleep(ASK_EVERY_S)

    def probe(self) -> bool:
        """Whether a replica waits to join (the group should re-form with it); False when the supervisor is slow."""
        reply = self.request({"probe": True}, PROBE_TIMEOUT_S)
        return bool(reply is not None and reply.ok and reply.data.get("regroup"))

    def request(self, extra: dict, timeout_s: float) -> Any:
        """One `rendezvous` request of this replica with `extra` args: the reply, or None when none came in time."""
        from tandem.daemons.runtime.control_channel import ControlTimeout

        args: dict[str, Any] = {"policy": self.policy, "rank": self.rank, "world_size": self.world_size, **extra}
        try:
            return self.runtime.channel.request("rendezvous", args, timeout_s=timeout_s)
        except ControlTimeout:
            return None

    def ask(self, extra: dict) -> dict:
        """One `rendezvous` request; ReplicaError when the supervisor refuses it (a config that does not match)."""
        reply = self.request(extra, 2.0)
        if reply is None:
            return {}
        if not reply.ok:
            raise ReplicaError(f"the supervisor refused replica {self.rank} of policy {self.policy!r}: {reply.message}")
        return dict(reply.data)

    def form(self, data: dict, deadline: float) -> ReplicaGroup:
        """Meet the generation's members at its store and start torch.distributed among them."""
        members = [int(m) for m in data["members"]]
        place = Place(members.index(self.rank), len(members), self.generation, str(data["master"]), self.backend)
        # the first generation waits for slow starters; a re-forming one for members that are all running
        if self.generation > 1:
            deadline = min(deadline, time.monotonic() + self.learner.collective_timeout_s)
        outcome: dict[str, BaseException | None] = {}
        learner = self.learner

        def meet() -> None:
            try:
                import torch.distributed as dist

                if place.master == self.address:
                    store = self.store
                else:
                    address, _, port = place.master.rpartition(":")
                    left = datetime.timedelta(seconds=max(deadline - time.monotonic(), 1.0))
                    store = dist.TCPStore(address, int(port), place.world_size, is_master=False, timeout=left)
                generation_store = dist.PrefixStore(f"tandem/{self.policy}/{self.generation}", store)
                if not wait_for_everyone(generation_store, place.world_size, deadline):
                    raise RuntimeError(f"the {place.world_size} members did not all reach the generation's store")
                options: dict[str, Any] = {}
                timeout_s = learner.collective_timeout_s
                if self.backend == "nccl":
                    # the group's own bounded wait names the failure first; NCCL's watchdog is the backstop
                    options["device_id"] = self.device
                    timeout_s += NCCL_WATCHDOG_GRACE_S
                dist.init_process_group(
                    self.backend,
                    store=generation_store,
                    rank=place.rank,
                    world_size=place.world_size,
                    timeout=datetime.timedelta(seconds=timeout_s),
                    **options,
                )
                outcome["error"] = None
            except BaseException as exc:  # reported on the daemon's thread
                outcome["error"] = exc

        thread = threading.Thread(target=meet, name="replica-rendezvous", daemon=True)
        thread.start()
        # every step of meet() is bounded (the store's connection, the count, Gloo's or NCCL's timeout); past
        # all of them the thread is stuck in torch, and this process cannot start another group beside it
        cap = deadline + learner.collective_timeout_s + NCCL_WATCHDOG_GRACE_S + 5.0
        while thread.is_alive():
            self.runtime.reporter.tick()
            if self.runtime.stop:
                raise ReplicaError(f"stopped while replica {self.rank} of policy {self.policy!r} met its group")
            if time.monotonic() > cap:
                self.stuck = True
                raise ReplicaError(
                    f"replica {self.rank} of policy {self.policy!r}: torch.distributed did not return from forming "
                    f"generation {self.generation}: the learner restarts"
                )
            thread.join(REPORT_EVERY_S)
        error = outcome.get("error")
        if error is not None:
            raise ReplicaError(
                f"replica {self.rank} of policy {self.policy!r} could not join generation {self.generation}: "
                f"{type(error).__name__}: {error}"
            )
        return ReplicaGroup(
            place,
            learner.collective_timeout_s,
            self.counts,
            learner.replica_check_every,
            device=self.device,
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


def wait_for_everyone(store: Any, world_size: int, deadline: float) -> bool:
    """Count this replica in at its generation's store, then wait (until `deadline`) for all to be counted;
    False if they were not.

    Gloo's own connection wait is the collective timeout, which is short on purpose; a sibling starting with the
    group can take longer than that (imports, a GPU's first touch), and each miss would fail the generation.
    Once all are counted, Gloo connects at once."""
    store.add(ARRIVED_KEY, 1)
    while store.add(ARRIVED_KEY, 0) < world_size:
        if time.monotonic() > deadline:
            return False
        time.sleep(ARRIVAL_POLL_S)
    return True


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
