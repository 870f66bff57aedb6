"""The kubelet's Summary API (`/stats/summary`, k8s.io/kubelet/pkg/apis/stats/v1alpha1): CPU and memory
of every pod's processes, and of the node, for metrics.k8s.io and `kubectl top`.

The node's figures are its own readings, as kubelet takes them from cAdvisor's root container: the
machine's busy CPU time from /proc/stat (everything but idle and iowait) and its memory from
/proc/meminfo (workingSetBytes MemTotal - MemAvailable, availableBytes MemAvailable, usageBytes
MemTotal - MemFree, rssBytes AnonPages). Nodes of one lab share a machine, so they report the same; a
node in a container of its own reads what that container's /proc shows.

A pod's processes are those in its network namespace (its server, its containers' commands, what
`kubectl exec` started there), found by the namespace's inode in /proc/<pid>/ns/net. CPU is utime+stime
from /proc/<pid>/stat (usageCoreNanoSeconds, cumulative over the processes alive now) and its rate over
the time since the previous sample (usageNanoCores, as cAdvisor's housekeeping gives it); memory is the
processes' resident set (workingSetBytes and rssBytes; kubelet's working set comes from the cgroup,
which kubelab's pods do not have). All of a pod's usage is its first container's until the runtime
says which process is whose (`pod_processes`, replaceable as containerexec.exec_argv is).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelab import timeutil
from kubelab.models import Pod
from kubelab.netnsthread import NETNS_RUN_DIR
from kubelab.validation import is_ascii_digits

from .containerexec import PodNamespaces

CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
NETNS_DIR = Path(NETNS_RUN_DIR)
FIRST_WINDOW = 1.0  # seconds between two samples when there is no earlier one to rate against


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_ns: int      # cumulative CPU time of the processes
    rss_bytes: int


@dataclass(frozen=True, slots=True)
class MachineUsage:
    cpu_ns: int            # cumulative busy CPU time of all CPUs
    working_set_bytes: int
    usage_bytes: int
    available_bytes: int
    rss_bytes: int


def parse_machine(proc_stat: str, meminfo: str) -> MachineUsage | None:
    """The machine's readings from the text of /proc/stat and /proc/meminfo; None when unreadable."""
    cpu = next((line.split()[1:] for line in proc_stat.splitlines() if line.startswith("cpu ")), None)
    memory: dict[str, int] = {}
    for line in meminfo.splitlines():
        name, _, rest = line.partition(":")
        fields = rest.split()
        if fields and is_ascii_digits(fields[0]):
            memory[name] = int(fields[0]) * 1024  # kB
    if cpu is None or len(cpu) < 8 or not all(is_ascii_digits(f) for f in cpu[:8]) or \
            not {"MemTotal", "MemFree", "MemAvailable"} <= memory.keys():
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in cpu[:8])
    total = memory["MemTotal"]
    return MachineUsage(cpu_ns=(user + nice + system + irq + softirq + steal) * CLOCK_TICK_NS,
                        working_set_bytes=total - memory["MemAvailable"], usage_bytes=total - memory["MemFree"],
                        available_bytes=memory["MemAvailable"], rss_bytes=memory.get("AnonPages", 0))


def machine_usage() -> MachineUsage | None:
    try:
        with open("/proc/stat") as stat, open("/proc/meminfo") as meminfo:
            return parse_machine(stat.read(), meminfo.read())
    except OSError:
        return None


def _netns_inode(name: str) -> int | None:
    try:
        return (NETNS_DIR / name).stat().st_ino
    except OSError:
        return None


def _process_usage(pid: str) -> tuple[int, Usage] | None:
    """(network namespace inode, usage) of one process; None when it is gone."""
    try:
        inode = os.stat(f"/proc/{pid}/ns/net").st_ino
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command: state(0) ... utime(11) stime(12) ... rss(21), in pages.
    return inode, Usage((int(fields[11]) + int(fields[12])) * CLOCK_TICK_NS, int(fields[21]) * PAGE)


def usage_by_netns(inodes: Iterable[int]) -> dict[int, Usage]:
    """The summed usage of the processes in each of these network namespaces (one pass over /proc)."""
    wanted = set(inodes)
    totals: dict[int, Usage] = {}
    for entry in os.listdir("/proc"):
        if not is_ascii_digits(entry):
            continue
        found = _process_usage(entry)
        if found is None or found[0] not in wanted:
            continue
        inode, usage = found
        before = totals.get(inode, Usage(0, 0))
        totals[inode] = Usage(before.cpu_ns + usage.cpu_ns, before.rss_bytes + usage.rss_bytes)
    return totals


def pod_processes(dataplane: PodNamespaces, pod: Pod) -> int | None:
    """The network namespace inode that holds the pod's processes; None when it runs nowhere here.
    REPLACE ME when the runtime can tell each container's processes apart."""
    name = dataplane.pod_netns(pod.key)
    return _netns_inode(name) if name else None


def _cpu(now: str, cpu_ns: int, nano_cores: int) -> dict[str, Any]:
    return {"time": now, "usageNanoCores": nano_cores, "usageCoreNanoSeconds": cpu_ns}


def _memory(now: str, rss: int) -> dict[str, Any]:
    return {"time": now, "usageBytes": rss, "workingSetBytes": rss, "rssBytes": rss, "pageFaults": 0,
            "majorPageFaults": 0}


class StatsProvider:
    """Samples pods' usage; each summary rates CPU against the sample before it."""

    def __init__(self, node_name: str, dataplane: PodNamespaces) -> None:
        self.node_name = node_name
        self.dataplane = dataplane
        self.started = timeutil.rfc3339()
        self._last: tuple[float, dict[str, Usage], MachineUsage | None] | None = None

    def _sample(self, pods: Mapping[str, Pod]) -> tuple[dict[str, Usage], MachineUsage | None]:
        inodes = {key: pod_processes(self.dataplane, pod) for key, pod in pods.items()}
        totals = usage_by_netns(i for i in inodes.values() if i is not None)
        return ({key: totals.get(inode, Usage(0, 0)) for key, inode in inodes.items() if inode is not None},
                machine_usage())

    async def summary(self, pods: Mapping[str, Pod]) -> dict[str, Any]:
        snapshot = dict(pods)
        if self._last is None:
            self._last = (time.monotonic(), *await asyncio.to_thread(self._sample, snapshot))
            await asyncio.sleep(FIRST_WINDOW)
        then, before, machine_before = self._last
        current, machine = await asyncio.to_thread(self._sample, snapshot)
        now_mono = time.monotonic()
        self._last = (now_mono, current, machine)
        elapsed = max(now_mono - then, 1e-3)
        now = timeutil.rfc3339()
        pod_stats = []
        node_cpu = node_rate = node_rss = 0
        for key, usage in sorted(current.items()):
            pod = snapshot[key]
            earlier = before.get(key, usage)
            rate = max(0, int((usage.cpu_ns - earlier.cpu_ns) / elapsed))
            node_cpu, node_rate, node_rss = node_cpu + usage.cpu_ns, node_rate + rate, node_rss + usage.rss_bytes
            names = [c.name for c in (pod.spec.containers if pod.spec else None) or [] if c.name]
            started = (pod.status.start_time if pod.status else None) or now
            containers = [{"name": name, "startTime": started,
                           "cpu": _cpu(now, usage.cpu_ns if i == 0 else 0, rate if i == 0 else 0),
                           "memory": _memory(now, usage.rss_bytes if i == 0 else 0)}
                          for i, name in enumerate(names)]
            pod_stats.append({"podRef": {"name": pod.metadata.name, "namespace": pod.metadata.namespace,
                                         "uid": pod.metadata.uid},
                              "startTime": started, "containers": containers,
                              "cpu": _cpu(now, usage.cpu_ns, rate), "memory": _memory(now, usage.rss_bytes)})
        node_memory = _memory(now, node_rss)
        if machine is not None:  # the node's own readings; the pods' sum only where /proc tells nothing
            earlier_cpu = machine_before.cpu_ns if machine_before is not None else machine.cpu_ns
            node_cpu, node_rate = machine.cpu_ns, max(0, int((machine.cpu_ns - earlier_cpu) / elapsed))
            node_memory = {"time": now, "availableBytes": machine.available_bytes, "usageBytes": machine.usage_bytes,
                           "workingSetBytes": machine.working_set_bytes, "rssBytes": machine.rss_bytes,
                           "pageFaults": 0, "majorPageFaults": 0}
        return {"node": {"nodeName": self.node_name, "startTime": self.started,
                         "cpu": _cpu(now, node_cpu, node_rate), "memory": node_memory},
                "pods": pod_stats, "windowSeconds": round(elapsed, 3)}
