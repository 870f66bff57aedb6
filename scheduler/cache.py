"""The scheduler's view of each node: allocatable, what bound and assumed pods request, and which pods.

kube-scheduler "assumes" a pod on its node the moment it decides, before the binding reaches the API
server, so a burst of decisions never over-commits a node while the watch catches up. The informer's
later event for the bound pod confirms the assumption; a failed bind forgets it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from kubelab.models import Node, Pod, Taint

from .resources import Resources, node_allocatable, pod_nonzero_requests, pod_requests


@dataclass(eq=False)
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
    # What the filters read from the Node object, taken apart once per node update rather than once
    # per scheduling decision: kube-scheduler's snapshot holds the parsed *v1.Node the same way.
    name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    filter_taints: tuple[Taint, ...] = ()   # NoSchedule and NoExecute: TaintToleration's Filter
    prefer_taints: tuple[Taint, ...] = ()   # PreferNoSchedule: TaintToleration's Score

    def __post_init__(self) -> None:
        self.refresh(self.node)

    def refresh(self, node: Node) -> None:
        self.node = node
        self.allocatable = node_allocatable(node)
        self.name = node.metadata.name or ""
        self.labels = node.metadata.labels or {}
        spec = node.spec
        self.unschedulable = bool(spec and spec.unschedulable)
        taints = tuple((spec.taints if spec else None) or ())
        self.filter_taints = tuple(t for t in taints if t.effect in ("NoSchedule", "NoExecute"))
        self.prefer_taints = tuple(t for t in taints if t.effect == "PreferNoSchedule")


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
        self._node_list: list[NodeInfo] | None = None
        self._arrays: NodeArrays | None = None

    def node_list(self) -> list[NodeInfo]:
        """Every node in a stable order (the order they were first seen), rebuilt only when a node
        comes or goes: the list that the rotating start index of percentageOfNodesToScore walks."""
        if self._node_list is None:
            self._node_list = list(self.nodes.values())
            self._arrays = None
        return self._node_list

    def node_arrays(self) -> NodeArrays:
        """node_list() as numpy arrays (for vectorized.py), kept current as pods and nodes change."""
        nodes = self.node_list()
        if self._arrays is None:
            self._arrays = NodeArrays(nodes)
        return self._arrays

    def _changed(self, info: NodeInfo, *, node: bool = False) -> None:
        arrays = self._arrays
        if arrays is None:
            return
        i = arrays.index.get(info.name)
        if i is not None and arrays.nodes[i] is info:
            if node:
                arrays.refresh_node(i, info)
            else:
                arrays.refresh_usage(i, info)

    def node_of(self, key: str) -> str | None:
        """The node a bound or assumed pod counts on."""
        entry = self._pods.get(key)
        return entry.node if entry is not None else None

    def is_assumed(self, key: str) -> bool:
        entry = self._pods.get(key)
        return entry is not None and entry.assumed

    # --- nodes -----------------------------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        name = node.metadata.name or ""
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo(node, node_allocatable(node))
            self.nodes[name] = info
            self._node_list = self._arrays = None
            for key, entry in self._pods.items():
                if entry.node == name:
                    self._account(info, key, entry, 1)
        else:
            info.refresh(node)
            self._changed(info, node=True)

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self._node_list = self._arrays = None

    # --- pods ------------------------------------------------------------------------------------

    def _account(self, info: NodeInfo, key: str, entry: _PodEntry, sign: int) -> None:
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
        self._changed(info)

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
        existing = self._pods.get(key)
        if existing is not None and existing.node == pod.node_name:
            existing.assumed = False  # the binding arrived: confirmed (a bound pod's requests cannot change)
            return
        self._put(key, _entry(pod, pod.node_name, assumed=False))

    def remove_pod(self, key: str) -> None:
        self._drop(key)

    def assume(self, pod: Pod, node: str, *, requests: Resources | None = None,
               nonzero: tuple[int, int] | None = None) -> None:
        """Count `pod` on `node` now; `requests`/`nonzero` save recomputing what the decision computed."""
        if requests is None or nonzero is None:
            self._put(pod.key, _entry(pod, node, assumed=True))
        else:
            self._put(pod.key, _PodEntry(node, requests, nonzero, True, host_ports(pod)))

    def forget(self, key: str) -> None:
        entry = self._pods.get(key)
        if entry is not None and entry.assumed:
            self._drop(key)

    def is_assumed_or_bound(self, key: str) -> bool:
        return key in self._pods


class NodeArrays:
    """Per node, in `nodes` order: allocatable and requested cpu, memory and pods, the non-zero requests
    used for scoring, and whether the node is plain (no taints, schedulable, cpu and memory > 0)."""

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.nodes = nodes
        self.names = [info.name for info in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        n = len(nodes)
        self.alloc_cpu, self.alloc_mem, self.alloc_pods = (np.zeros(n, np.int64) for _ in range(3))
        self.used_cpu, self.used_mem, self.used_pods = (np.zeros(n, np.int64) for _ in range(3))
        self.nz_cpu, self.nz_mem = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.plain = np.zeros(n, np.bool_)
        for i, info in enumerate(nodes):
            self.refresh_node(i, info)

    def refresh_node(self, i: int, info: NodeInfo) -> None:
        alloc = info.allocatable
        self.alloc_cpu[i], self.alloc_mem[i], self.alloc_pods[i] = alloc.milli_cpu, alloc.memory, alloc.pods
        self.plain[i] = (not info.unschedulable and not info.filter_taints and not info.prefer_taints
                         and alloc.milli_cpu > 0 and alloc.memory > 0)
        self.refresh_usage(i, info)

    def refresh_usage(self, i: int, info: NodeInfo) -> None:
        used = info.requested
        self.used_cpu[i], self.used_mem[i], self.used_pods[i] = used.milli_cpu, used.memory, used.pods
        self.nz_cpu[i], self.nz_mem[i] = info.nonzero_cpu, info.nonzero_memory
