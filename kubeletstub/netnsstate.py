"""The netns lab's records and its state file: what a lab made (nodes, pods, namespaces, processes), written
as JSON so that a later process can remove whatever a crashed owner left behind (`cleanup`), and read back
to find a node's or pod's namespace (`lookup_netns`, for ``kubelab exec``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyroute2 import netns as pyroute2_netns

from kubeletstub.podprocess import (
    PodProcess,
    PodProcessError,
    is_process_running,
    stop_pod_processes,
)

from .netlinkops import DataplaneError, remove_netns, remove_netns_etc
from .netnames import NODE_IFNAME

log = logging.getLogger(__name__)

STATE_VERSION = 1


@dataclass(frozen=True)
class NodeNet:
    """A node's namespace and addresses."""

    name: str
    netns: str | None  # None: the current network namespace (current_netns labs)
    ip: str  # on the uplink, e.g. 10.240.0.11
    prefixlen: int  # of the node network, e.g. 24
    pod_cidr: str  # e.g. 10.244.1.0/24
    gateway: str  # the pods' default gateway, first host of pod_cidr, e.g. 10.244.1.1
    lab_port: str  # the bridge port in the lab namespace ("" for the current namespace)
    uplink: str = NODE_IFNAME  # the interface holding `ip`, where node routes point

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "netns": self.netns,
            "ip": self.ip,
            "prefixLength": self.prefixlen,
            "podCIDR": self.pod_cidr,
            "gateway": self.gateway,
            "labPort": self.lab_port,
            "uplink": self.uplink,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeNet:
        return cls(
            name=data["name"],
            netns=data["netns"],
            ip=data["ip"],
            prefixlen=int(data["prefixLength"]),
            pod_cidr=data["podCIDR"],
            gateway=data["gateway"],
            lab_port=data["labPort"],
            uplink=data.get("uplink", NODE_IFNAME),
        )


@dataclass(frozen=True)
class PodNet:
    """A pod's namespace, address, host-side veth and server process (None if it has no ports). A
    hostNetwork pod has none of its own: its namespace is the node's ("" when that is the current one),
    its address the node's, and no veth."""

    node: str
    key: str  # "namespace/name"
    netns: str
    ip: str
    gateway: str
    host_ifname: str  # the veth end in the node namespace
    server: PodProcess | None = None
    host_network: bool = False

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "key": self.key,
            "netns": self.netns,
            "ip": self.ip,
            "gateway": self.gateway,
            "hostIfname": self.host_ifname,
            "server": self.server.to_json() if self.server is not None else None,
            "hostNetwork": self.host_network,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PodNet:
        server = data.get("server")
        return cls(
            node=data["node"],
            key=data["key"],
            netns=data["netns"],
            ip=data["ip"],
            gateway=data["gateway"],
            host_ifname=data["hostIfname"],
            server=PodProcess.from_json(server) if server else None,
            host_network=bool(data.get("hostNetwork")),
        )


@dataclass
class CleanupReport:
    """What `cleanup` removed, and the labs it left alone because their owner is still running."""

    removed_netns: list[str] = field(default_factory=list)
    stopped_pids: list[int] = field(default_factory=list)
    skipped_prefixes: list[str] = field(default_factory=list)


def cleanup(
    state_dir: str | os.PathLike[str], *, prefix: str | None = None, force: bool = False
) -> CleanupReport:
    """Remove the labs recorded under `state_dir` (only `prefix`'s if given), e.g. after a crash.

    Stops the recorded pod processes (only if PID and start time still match), deletes the recorded
    namespaces and the state files. A lab whose owning process is another live process is skipped
    unless `force`. Safe to call when there is nothing to clean.
    """
    report = CleanupReport()
    errors: list[str] = []
    for path in _state_files(Path(state_dir), prefix):
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            continue
        except ValueError as exc:
            errors.append(f"{path}: unreadable state file: {exc}")
            continue
        if not force and _owner_is_other_live_process(state.get("owner") or {}):
            report.skipped_prefixes.append(str(state.get("prefix")))
            continue
        try:
            removed, stopped = teardown_state(state)
        except DataplaneError as exc:
            errors.append(str(exc))
            continue
        report.removed_netns += removed
        report.stopped_pids += stopped
        remove_state_file(path, Path(state["logDir"]) if state.get("logDir") else None)
    if errors:
        raise DataplaneError("; ".join(errors))
    return report


def lookup_netns(
    state_dir: str | os.PathLike[str], node: str, *, pod_key: str | None = None, prefix: str | None = None
) -> str:
    """The namespace of `node` (or of pod `pod_key` on it) from the state files (``kubelab exec``)."""
    found: list[str] = []
    for path in _state_files(Path(state_dir), prefix):
        try:
            state = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            continue
        if pod_key is None:
            found += [n["netns"] for n in state.get("nodes", []) if n["name"] == node]
        else:
            found += [p["netns"] for p in state.get("pods", []) if p["node"] == node and p["key"] == pod_key]
    what = f"pod {pod_key} on node {node}" if pod_key else f"node {node}"
    if not found:
        raise DataplaneError(f"no {what} in the netns dataplane state under {state_dir}")
    if len(found) > 1:
        raise DataplaneError(f"{what} is in several labs under {state_dir}; pass a prefix")
    return found[0]


def teardown_state(state: Mapping[str, Any]) -> tuple[list[str], list[int]]:
    """Stop the pod processes, then delete the namespaces, newest first. Returns what it removed."""
    errors: list[str] = []
    stopped: list[int] = []
    servers = [pod.server for pod in map(PodNet.from_json, state.get("pods", [])) if pod.server is not None]
    try:
        # Before the namespaces go: a process inside keeps a deleted namespace alive. All at once, with
        # one grace period: one by one, 300 pods took 28 s under load.
        stopped = [proc.pid for proc in stop_pod_processes(servers)]  # also reaps our (exited) children
    except (OSError, PodProcessError) as exc:
        errors.append(f"stop pods: {exc}")
    namespaces: list[str] = list(state.get("namespaces", []))
    _warn_about_strangers(namespaces)
    removed: list[str] = []
    for name in reversed(namespaces):
        try:
            if remove_netns(name):
                removed.append(name)
            remove_netns_etc(name)
        except OSError as exc:
            errors.append(f"remove network namespace {name}: {exc}")
    if errors:
        raise DataplaneError(f"lab {state.get('prefix')}: " + "; ".join(errors))
    return removed, stopped


def _warn_about_strangers(namespaces: Sequence[str]) -> None:
    # Processes we did not start (`kubelab exec node-1 -- sleep 1d`) keep a namespace, and so its
    # interfaces, alive after we unmount it. They are not ours to kill; say so.
    ours = set(namespaces)
    for name, pids in pyroute2_netns.ns_pids().items():
        if name in ours and pids:
            log.warning(
                "processes %s still run in network namespace %s; it lingers until they exit", pids, name
            )


def _owner_is_other_live_process(owner: Mapping[str, Any]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    return is_process_running(pid, owner.get("startTime"))


def state_file_path(state_dir: Path, prefix: str) -> Path:
    return state_dir / f"netns-{prefix}.json"


def lab_log_dir(state_dir: Path, prefix: str) -> Path:
    return state_dir / f"netns-{prefix}-logs"


def _state_files(state_dir: Path, prefix: str | None) -> list[Path]:
    if prefix is not None:
        return [state_file_path(state_dir, prefix)]
    return sorted(state_dir.glob("netns-*.json"))


def remove_state_file(path: Path, log_dir: Path | None) -> None:
    path.unlink(missing_ok=True)
    if log_dir is not None:
        shutil.rmtree(log_dir, ignore_errors=True)
