"""Pod IPs from the node's podCIDR, handed out like the host-local CNI plugin does.

host-local allocates the next free address after the last one it gave out, wrapping at the end of the
range, rather than the lowest free one: a deleted pod's address is not reused at once, so a pod that is
recreated comes back with a new IP — the very reason Services exist (the first seed's point). The
network address and the gateway (.1, which sits on the node's side of every pod veth) are never given.
"""

from __future__ import annotations

import ipaddress


class RangeExhausted(Exception):
    pass


class PodIPAllocator:
    def __init__(self, pod_cidr: str) -> None:
        self.network = ipaddress.ip_network(pod_cidr)
        self.gateway = self.network[1]
        self._first = int(self.network[2])
        self._last = int(self.network.broadcast_address) - 1
        self._next = self._first
        self._owners: dict[str, str] = {}  # ip -> pod key
        self._by_pod: dict[str, str] = {}

    def allocate(self, pod_key: str) -> str:
        existing = self._by_pod.get(pod_key)
        if existing:
            return existing
        size = self._last - self._first + 1
        for step in range(size):
            candidate = self._first + (self._next - self._first + step) % size
            ip = str(ipaddress.ip_address(candidate))
            if ip not in self._owners:
                self._next = candidate + 1 if candidate < self._last else self._first
                self._owners[ip] = pod_key
                self._by_pod[pod_key] = ip
                return ip
        raise RangeExhausted(f"no free addresses left in {self.network}")

    def reserve(self, pod_key: str, ip: str) -> bool:
        """Re-adopt an address a pod already has (after a kubelet restart); False if it is not ours."""
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        if addr not in self.network or int(addr) < self._first or int(addr) > self._last:
            return False
        owner = self._owners.get(ip)
        if owner is not None and owner != pod_key:
            return False
        previous = self._by_pod.get(pod_key)
        if previous is not None and previous != ip:
            self._owners.pop(previous, None)  # a pod holds one address; never leak the one it had
        self._owners[ip] = pod_key
        self._by_pod[pod_key] = ip
        if int(addr) >= self._next:
            self._next = int(addr) + 1 if int(addr) < self._last else self._first
        return True

    def release(self, pod_key: str) -> None:
        ip = self._by_pod.pop(pod_key, None)
        if ip is not None:
            self._owners.pop(ip, None)

    def ip_of(self, pod_key: str) -> str | None:
        return self._by_pod.get(pod_key)
