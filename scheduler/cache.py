"""The scheduler's view of each node: allocatable, what bound and assumed pods request, and which pods.

kube-scheduler "assumes" a pod on its node the moment it decides, before the binding reaches the API
server, so a burst of decisions never over-commits a node while the watch catches up. The informer's
later event for the bound pod confirms the assumption; a failed bind forgets it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kubelab.models import Node, Pod

from .resources import Resources, node_allocatable, pod_nonzero_requests, pod_requests


@dataclass
class NodeInfo:
    node: Node
    allocatable: Resources
    requested: Resources = field(default_factory=Resources)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    pods: set[str] = field(default_factory=set)
    # NodeInfo.UsedPorts: (protocol, hostIP, hostPort) of every bound or assumed pod, counted so that
    # removing one of two pods declaring the same port leaves it used.
    used_ports: Counter[tuple[str, str, int]] = field(default_factory=Counter)

    @property
    def name(self) -> str:
        return self.node.metadata.name or ""


@dataclass
class _PodEntry:
    node: str
    requests: Resources
    nonzero: tuple[int, int]
    assumed: bool
    host_ports: frozenset[tuple[str, str, int]] = frozenset()


def host_ports(pod: Pod) -> frozenset[tuple[str, str, int]]:
    """The pod's (protocol, hostIP, hostPort) triples: regular containers only, as NodePorts reads them;
    an empty protocol is TCP and an empty hostIP 0.0.0.0 (HostPortInfo.sanitize)."""
    ports = set()
    for c in (pod.spec.containers if pod.spec else None) or []:
        for p in c.ports or []:
            if p.host_port and p.host_port > 0:
                ports.add((p.protocol or "TCP", p.host_ip or "0.0.0.0", p.host_port))
    return frozenset(ports)


def _entry(pod: Pod, node: str, *, assumed: bool) -> _PodEntry:
    return _PodEntry(node, pod_requests(pod), pod_nonzero_requests(pod), assumed, host_ports(pod))


class Cache:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodEntry] = {}

    # --- nodes -----------------------------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        name = node.metadata.name or ""
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo(node, node_allocatable(node))
            self.nodes[name] = info
            for key, entry in self._pods.items():
                if entry.node == name:
                    self._account(info, key, entry, 1)
        else:
            info.node = node
            info.allocatable = node_allocatable(node)

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)

    # --- pods ------------------------------------------------------------------------------------

    @staticmethod
    def _account(info: NodeInfo, key: str, entry: _PodEntry, sign: int) -> None:
        info.requested.add(entry.requests, sign)
        info.requested.pods += sign
        info.nonzero_cpu += sign * entry.nonzero[0]
        info.nonzero_memory += sign * entry.nonzero[1]
        if sign > 0:
            info.pods.add(key)
            info.used_ports.update(entry.host_ports)
        else:
            info.pods.discard(key)
            info.used_ports.subtract(entry.host_ports)
            info.used_ports += Counter()  # drop the ports no pod holds any more

    def _put(self, key: str, entry: _PodEntry) -> None:
        self._drop(key)
        self._pods[key] = entry
        info = self.nodes.get(entry.node)
        if info is not None:
            self._account(info, key, entry, 1)

    def _drop(self, key: str) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            info = self.nodes.get(old.node)
            if info is not None:
                self._account(info, key, old, -1)

    def set_pod(self, pod: Pod) -> None:
        """A pod seen by the informer: bound, non-terminal pods count on their node."""
        key = pod.key
        if not pod.node_name or pod.is_terminal():
            existing = self._pods.get(key)
            if existing is not None and existing.assumed and not pod.is_terminal():
                return  # our binding is still on its way
            self._drop(key)
            return
        self._put(key, _entry(pod, pod.node_name, assumed=False))

    def remove_pod(self, key: str) -> None:
        self._drop(key)

    def assume(self, pod: Pod, node: str) -> None:
        self._put(pod.key, _entry(pod, node, assumed=True))

    def forget(self, key: str) -> None:
        entry = self._pods.get(key)
        if entry is not None and entry.assumed:
            self._drop(key)

    def is_assumed_or_bound(self, key: str) -> bool:
        return key in self._pods
