"""ClusterIP and NodePort allocation, as reservation keys claimed in the Service's own transaction.

Each allocated address or port is one etcd key (`/registry/ranges/serviceips/10.96.4.7`,
`/registry/ranges/servicenodeports/31122`), created in the same transaction as the Service that holds
it and deleted with it. etcd's compare on create_revision == 0 makes a double allocation impossible,
even with many API servers or a crash in the middle: either the Service and its reservations exist
together or neither does. (Kubernetes 1.31+ does the same with one IPAddress object per ClusterIP.)

Dynamic picks follow kube-apiserver: the low "static band" of each range is left for addresses users
ask for by hand, and dynamic allocation draws at random from the rest first.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass

from kubelab import addressing

IP_PREFIX = "/registry/ranges/serviceips/"
PORT_PREFIX = "/registry/ranges/servicenodeports/"


def ip_key(ip: str) -> str:
    return IP_PREFIX + ip


def port_key(port: int) -> str:
    return PORT_PREFIX + str(port)


def _static_band(size: int, divisor: int, low: int, high: int) -> int:
    return min(max(low, size // divisor), high)


@dataclass(frozen=True)
class IPRange:
    cidr: str = addressing.SERVICE_CIDR

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.cidr)

    def contains(self, ip: str) -> bool:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        net = self.network
        # The network and broadcast addresses are never handed out.
        return addr in net and addr != net.network_address and addr != net.broadcast_address

    def pick(self, taken: set[str] | None = None, rng: random.Random | None = None) -> str:
        """A random free address, from above the static band when possible."""
        rng = rng or random.Random()
        net = self.network
        size = net.num_addresses - 2
        band = _static_band(size, 16, 16, 256)
        first, last = 1, size  # offsets; 0 is the network address
        taken = taken or set()
        for lo in (band + 1, first):
            for _ in range(64):
                candidate = str(net[rng.randint(lo, last)])
                if candidate not in taken:
                    return candidate
        for offset in range(first, last + 1):  # nearly full: walk it
            candidate = str(net[offset])
            if candidate not in taken:
                return candidate
        raise RangeFull(f"range is full ({self.cidr})")


@dataclass(frozen=True)
class PortRange:
    low: int = addressing.NODEPORT_RANGE[0]
    high: int = addressing.NODEPORT_RANGE[1]

    def contains(self, port: int) -> bool:
        return self.low <= port <= self.high

    def pick(self, taken: set[int] | None = None, rng: random.Random | None = None) -> int:
        rng = rng or random.Random()
        size = self.high - self.low + 1
        band = _static_band(size, 32, 16, 128)
        taken = taken or set()
        for lo in (self.low + band, self.low):
            for _ in range(64):
                candidate = rng.randint(lo, self.high)
                if candidate not in taken:
                    return candidate
        for candidate in range(self.low, self.high + 1):
            if candidate not in taken:
                return candidate
        raise RangeFull(f"range is full ({self})")

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


class RangeFull(Exception):
    pass
