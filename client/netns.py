"""Hosts on one machine: network namespaces joined by a bridge to this one (root and iproute2 needed), for
benchmarks and tests of processes that must reach each other over a network, not loopback."""

from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass, field

SUBNET = "10.215.{}.{}"  # a private /24 unlikely to be in use: this namespace .1 on the bridge, the others .2, .3 ...


class NetnsError(RuntimeError):
    """The namespaces cannot be made here (not root, no `ip`, or the kernel refused): the message says which."""


def ip(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError as exc:
        raise NetnsError("the `ip` command (iproute2) is not installed: apt-get install iproute2") from exc


@dataclass
class Hosts:
    """`count` namespaces, each with one address on a bridge that holds `head` in this namespace; removed on exit.

    `places[i]` is (namespace, address); `wrap(i)` prefixes a command to run it in namespace i."""

    count: int
    subnet: str = SUBNET
    head: str = ""
    places: list[tuple[str, str]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    bridge: str = ""

    def __enter__(self) -> Hosts:
        if os.geteuid() != 0:
            raise NetnsError("network namespaces need root (run as root, or without the namespaces)")
        tag = f"{os.getpid() % 1000}{random.randrange(100)}"
        third = random.randrange(1, 250)
        self.bridge, self.head = f"tb{tag}", self.subnet.format(third, 1)
        try:
            self.run(("link", "add", self.bridge, "type", "bridge"))
            self.run(("addr", "add", f"{self.head}/24", "dev", self.bridge))
            self.run(("link", "set", self.bridge, "up"))
            for i in range(self.count):
                ns, address = f"tandem-h{i}-{tag}", self.subnet.format(third, i + 2)
                outside, inside = f"th{i}{tag}", f"tg{i}{tag}"
                self.run(("netns", "add", ns))
                self.places.append((ns, address))
                self.run(("link", "add", outside, "type", "veth", "peer", "name", inside))
                self.links.append(outside)
                for args in (
                    ("link", "set", inside, "netns", ns),
                    ("link", "set", outside, "master", self.bridge),
                    ("link", "set", outside, "up"),
                    ("-n", ns, "addr", "add", f"{address}/24", "dev", inside),
                    ("-n", ns, "link", "set", inside, "up"),
                    ("-n", ns, "link", "set", "lo", "up"),
                ):
                    self.run(args)
        except BaseException:
            self.__exit__()
            raise
        return self

    def run(self, args: tuple[str, ...]) -> None:
        done = ip(*args)
        if done.returncode != 0:
            raise NetnsError(f"cannot wire the hosts (ip {' '.join(args)}): {done.stderr.strip()}")

    def wrap(self, index: int) -> list[str]:
        return ["ip", "netns", "exec", self.places[index][0]]

    def __exit__(self, *exc: object) -> None:
        for link in self.links:
            ip("link", "del", link)  # both ends, if the namespace still holds one
        for ns, _ in self.places:
            ip("netns", "del", ns)
        if self.bridge:
            ip("link", "del", self.bridge)
        self.links, self.places = [], []
