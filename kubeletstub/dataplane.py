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
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .runtime import ContainerRuntime

if TYPE_CHECKING:
    # For the type only: importing netns loads pyroute2, which the render dataplane never needs.
    from .netns import LabNetwork


class Dataplane(Protocol):
    node_netns: str | None
    # The node's container runtime: it belongs here, not to the kubelet, because like containerd it keeps
    # the containers running while a kubelet is restarted.
    runtime: ContainerRuntime

    def pod_netns(self, pod_key: str) -> str | None: ...

    async def start_node(self) -> None: ...

    async def start_pod(self, pod_key: str, ip: str, ports: Sequence[tuple[int, str]], *,
                        resolv_conf: str | None = None, request_log: str | None = None,
                        host_network: bool = False) -> None: ...

    async def stop_pod(self, pod_key: str) -> None: ...

    async def sync_routes(self, routes: Mapping[str, str]) -> None: ...

    def pod_running(self, pod_key: str) -> bool: ...

    def node_argv(self, cmd: Sequence[str]) -> list[str] | None: ...

    def pod_argv(self, pod_key: str, cmd: Sequence[str]) -> list[str] | None: ...


def node_runtime(root: Path | None, *, namespaces: bool) -> ContainerRuntime:
    """A node's runtime with its files under `root` (pods/ and log/pods/, kubelet's /var/lib/kubelet/pods
    and /var/log/pods); when None, a directory under the temporary directory named after this process,
    made only if a container is ever started. Whatever is there is removed first."""
    if root is None:
        root = Path(tempfile.gettempdir()) / f"kubelab-node-{os.getpid()}-{secrets.token_hex(4)}"
    runtime = ContainerRuntime(root, root / "log" / "pods", namespaces=namespaces)
    runtime.clear()  # what a killed run left: its containers died with it, their files stayed
    return runtime


# Said once at start-up by whoever runs a render dataplane (no root: no namespaces).
RENDER_NOTE = ("render dataplane: a container with a command runs it as a plain process on this host, with its "
               "env and workingDir, in the host's network, hostname and filesystem (no pod IP, /etc/hosts or "
               "volumes; containers with volumeMounts are refused, the service account token is left out); exec, "
               "logs and restarts work, no traffic reaches pods")


class RenderDataplane:
    """No namespaces: pods get no network. Containers with a command run as plain processes on the host
    (no pod IP, hostname or volumes: see `runtime.py`), when a `root` is given for their files."""

    node_netns: str | None = None

    def __init__(self, root: Path | None = None) -> None:
        self._pods: set[str] = set()
        self.runtime = node_runtime(root, namespaces=False)

    def pod_netns(self, pod_key: str) -> str | None:
        return None

    async def start_node(self) -> None:
        return None

    async def start_pod(self, pod_key: str, ip: str, ports: Sequence[tuple[int, str]], *,
                        resolv_conf: str | None = None, request_log: str | None = None,
                        host_network: bool = False) -> None:
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


class NetnsDataplane:
    """One node of a LabNetwork: its namespace (None: the current one), its pods' namespaces and
    processes, its routes."""

    def __init__(self, lab: LabNetwork, node: str, ip: str, pod_cidr: str, *, root: Path | None = None) -> None:
        self.lab = lab
        self.node = node
        self.ip = ip
        self.pod_cidr = pod_cidr
        self.node_netns: str | None = None if lab.current_netns else lab.node_netns(node)
        self.runtime = node_runtime(root or lab.state_dir / "nodes" / node, namespaces=True)

    def pod_netns(self, pod_key: str) -> str | None:
        """The pod's network namespace: its own, or for a hostNetwork pod the node's (None when the node is
        the current namespace, which containers then stay in)."""
        pod = self.lab.pod(self.node, pod_key)
        return pod.netns or None if pod is not None else None

    async def start_node(self) -> None:
        await asyncio.to_thread(self.lab.add_node, self.node, self.ip, self.pod_cidr)

    async def start_pod(self, pod_key: str, ip: str, ports: Sequence[tuple[int, str]], *,
                        resolv_conf: str | None = None, request_log: str | None = None,
                        host_network: bool = False) -> None:
        from .podprocess import ServedPort

        served = [ServedPort(port, "UDP" if proto == "UDP" else "TCP") for port, proto in ports
                  if proto in ("TCP", "UDP")]
        if host_network:  # the node's namespace and address: kubelet sets up no pod network for these
            await asyncio.to_thread(self.lab.add_host_network_pod, self.node, pod_key, ports=served,
                                    request_log=request_log)
            return
        await asyncio.to_thread(self.lab.add_pod, self.node, pod_key, ip, ports=served, resolv_conf=resolv_conf,
                                request_log=request_log)

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
        if pod is None:
            return None
        return ["ip", "netns", "exec", pod.netns, *cmd] if pod.netns else list(cmd)


HOST_NETNS_PREFIX = "kl"  # pods of `kubelab node --dataplane host` live in kl-<node>_<namespace>_<pod>


def open_host_dataplane(state_dir: str | os.PathLike[str], node: str, ip: str, pod_cidr: str) -> NetnsDataplane:
    """The dataplane of `kubelab node --dataplane host`: the node is the network namespace this process
    runs in (a node container), its pods are namespaces wired to it. Whatever an earlier run that
    crashed left in `state_dir` is removed first. Blocks (run it off the event loop); `close()` the
    result's lab on the way out."""
    from .netns import LabNetwork  # here, not at the top: it loads pyroute2, which render mode never needs
    from .netnsstate import cleanup

    cleanup(state_dir, prefix=HOST_NETNS_PREFIX)
    lab = LabNetwork(HOST_NETNS_PREFIX, state_dir, current_netns=True)
    lab.create()
    return NetnsDataplane(lab, node, ip, pod_cidr)
