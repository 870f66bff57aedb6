"""Dataplanes: where a node's pods actually run.

`RenderDataplane` runs nothing: pods get addresses and statuses, the proxy agent renders rules, and no
packet moves (no root needed). `NetnsDataplane` gives every pod a network namespace and a server
process inside the node's namespace (root); the node's namespace is either one of its own in a lab
(`kubelab up --dataplane netns`) or, for a lab made with ``current_netns=True``, the namespace the
process runs in (`kubelab node --dataplane host`, a node container). All are driven by the same
kubelet code.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Protocol


class Dataplane(Protocol):
    node_netns: str | None

    async def start_node(self) -> None: ...

    async def start_pod(self, pod_key: str, ip: str, ports: Sequence[tuple[int, str]], *,
                        resolv_conf: str | None = None) -> None: ...

    async def stop_pod(self, pod_key: str) -> None: ...

    async def sync_routes(self, routes: Mapping[str, str]) -> None: ...

    def pod_running(self, pod_key: str) -> bool: ...

    def node_argv(self, cmd: Sequence[str]) -> list[str] | None: ...

    def pod_argv(self, pod_key: str, cmd: Sequence[str]) -> list[str] | None: ...

    def pod_netns(self, pod_key: str) -> str | None: ...


class RenderDataplane:
    """No namespaces, no processes: pods exist only as API objects."""

    node_netns: str | None = None

    def __init__(self) -> None:
        self._pods: set[str] = set()

    async def start_node(self) -> None:
        return None

    async def start_pod(self, pod_key: str, ip: str, ports: Sequence[tuple[int, str]], *,
                        resolv_conf: str | None = None) -> None:
        self._pods.add(pod_key)

    async def stop_pod(self, pod_key: str) -> None:
        self._pods.discard(pod_key)

    async def sync_routes(self, routes: Mapping[str, str]) -> None:
        return None

    def pod_running(self, pod_key: str) -> bool:
        return pod_key in self._pods

    def node_argv(self, cmd: Sequence[str]) -> list[str] | None:
        return None  # nothing runs in render mode, so nothing can be probed or exec'd

    def pod_argv(self, pod_key: str, cmd: Sequence[str]) -> list[str] | None:
        return None

    def pod_netns(self, pod_key: str) -> str | None:
        return None


class NetnsDataplane:
    """One node of a LabNetwork: its namespace (None: the current one), its pods' namespaces and
    processes, its routes."""

    def __init__(self, lab: object, node: str, ip: str, pod_cidr: str) -> None:
        from .netns import LabNetwork

        assert isinstance(lab, LabNetwork)
        self.lab = lab
        self.node = node
        self.ip = ip
        self.pod_cidr = pod_cidr
        self.node_netns: str | None = None if lab.current_netns else lab.node_netns(node)

    async def start_node(self) -> None:
        await asyncio.to_thread(self.lab.add_node, self.node, self.ip, self.pod_cidr)

    async def start_pod(self, pod_key: str, ip: str, ports: Sequence[tuple[int, str]], *,
                        resolv_conf: str | None = None) -> None:
        from .podprocess import ServedPort

        served = [ServedPort(port, "UDP" if proto == "UDP" else "TCP") for port, proto in ports
                  if proto in ("TCP", "UDP")]
        await asyncio.to_thread(self.lab.add_pod, self.node, pod_key, ip, ports=served, resolv_conf=resolv_conf)

    async def stop_pod(self, pod_key: str) -> None:
        await asyncio.to_thread(self.lab.remove_pod, self.node, pod_key)

    async def sync_routes(self, routes: Mapping[str, str]) -> None:
        await asyncio.to_thread(self.lab.sync_node_routes, self.node, dict(routes))

    def pod_running(self, pod_key: str) -> bool:
        from .podprocess import is_pod_process_alive

        pod = self.lab.pod(self.node, pod_key)
        return pod is not None and (pod.server is None or is_pod_process_alive(pod.server))

    def node_argv(self, cmd: Sequence[str]) -> list[str] | None:
        if self.node_netns is None:
            return list(cmd)  # the node is where we run
        return ["ip", "netns", "exec", self.node_netns, *cmd]

    def pod_argv(self, pod_key: str, cmd: Sequence[str]) -> list[str] | None:
        pod = self.lab.pod(self.node, pod_key)
        return ["ip", "netns", "exec", pod.netns, *cmd] if pod is not None else None

    def pod_netns(self, pod_key: str) -> str | None:
        pod = self.lab.pod(self.node, pod_key)
        return pod.netns if pod is not None else None


HOST_NETNS_PREFIX = "kl"  # pods of `kubelab node --dataplane host` live in kl-<node>_<namespace>_<pod>


def open_host_dataplane(state_dir: str | os.PathLike[str], node: str, ip: str, pod_cidr: str) -> NetnsDataplane:
    """The dataplane of `kubelab node --dataplane host`: the node is the network namespace this process
    runs in (a node container), its pods are namespaces wired to it. Whatever an earlier run that
    crashed left in `state_dir` is removed first. Blocks (run it off the event loop); `close()` the
    result's lab on the way out."""
    from .netns import LabNetwork, cleanup

    cleanup(state_dir, prefix=HOST_NETNS_PREFIX)
    lab = LabNetwork(HOST_NETNS_PREFIX, state_dir, current_netns=True)
    lab.create()
    return NetnsDataplane(lab, node, ip, pod_cidr)
