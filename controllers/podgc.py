"""The pod garbage collector: kube-controller-manager's podgc controller (pkg/controller/podgc).

Every `check_period` (kube: 20 s) it looks at every pod and node in its caches and force-deletes
(grace period 0) four kinds of pods no kubelet will ever clean up:

* terminated pods (phase neither Pending, Running nor Unknown) beyond `terminated_pod_threshold` (kube's
  --terminated-pod-gc-threshold, 12500), evicted ones first, then oldest first, names breaking ties;
* terminating pods on a node that is not Ready and carries the `node.kubernetes.io/out-of-service` taint
  (the non-graceful node shutdown an administrator declares);
* orphaned pods, bound to a node that no longer exists: a node missing from the cache is quarantined for
  `quarantine` (kube: 40 s) and then looked up with a GET, so a node that is only late in the cache
  keeps its pods; its pods get the DisruptionTarget condition (DeletionByPodGC, "PodGC: node no longer
  exists");
* terminating pods that were never scheduled (no node will ever confirm their deletion).

Before deleting a pod that has not finished, it is marked Failed through its status (with the condition
when there is one), as kube does, so a Job or a watcher sees a terminal phase rather than a pod that
vanished while Running. Selection is pure (`terminated_to_delete`, `terminating_out_of_service`,
`unscheduled_terminating`); the controller does the I/O.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError, Informer
from kubelab.models import Node, Pod

log = logging.getLogger(__name__)

NAME = "pod-garbage-collector"
CHECK_PERIOD = 20.0
QUARANTINE = 40.0
TERMINATED_POD_THRESHOLD = 12500
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
ORPHAN_CONDITION = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists"}


def is_terminated(pod: Pod) -> bool:
    """isPodTerminated: any phase but Pending, Running and Unknown (an empty one included)."""
    return pod.phase not in ("Pending", "Running", "Unknown")


def _eviction_then_age(pod: Pod) -> tuple[bool, str, str]:
    """byEvictionAndCreationTimestamp: evicted pods (Failed, reason Evicted) first, then the oldest,
    then by name. RFC 3339 timestamps in UTC order as strings."""
    evicted = pod.phase == "Failed" and (pod.status.reason if pod.status else None) == "Evicted"
    return (not evicted, pod.metadata.creation_timestamp or "", pod.metadata.name or "")


def terminated_to_delete(pods: Iterable[Pod], threshold: int) -> list[Pod]:
    """gcTerminated: the terminated pods over `threshold`, in the order kube deletes them; none when the
    threshold is 0 or less (the collection is off)."""
    if threshold <= 0:
        return []
    terminated = [p for p in pods if is_terminated(p)]
    excess = len(terminated) - threshold
    return sorted(terminated, key=_eviction_then_age)[:excess] if excess > 0 else []


def _is_ready(node: Node) -> bool:
    ready = node.condition("Ready")
    return ready is not None and ready.status == "True"


def terminating_out_of_service(pods: Iterable[Pod], nodes: dict[str, Node]) -> list[Pod]:
    """gcTerminating: terminating pods on a known node that is not Ready and is tainted out-of-service."""
    chosen = []
    for pod in pods:
        node = nodes.get(pod.node_name) if pod.metadata.deletion_timestamp else None
        if node is not None and not _is_ready(node) and any(
                t.key == OUT_OF_SERVICE_TAINT for t in (node.spec.taints if node.spec else None) or []):
            chosen.append(pod)
    return sorted(chosen, key=_eviction_then_age)


def unscheduled_terminating(pods: Iterable[Pod]) -> list[Pod]:
    """gcUnscheduledTerminating: terminating pods that were never bound to a node."""
    return [p for p in pods if p.metadata.deletion_timestamp and not p.node_name]


class PodGCController:
    def __init__(self, api: ApiClient, nodes: Informer[Node], pods: Informer[Pod], *,
                 terminated_pod_threshold: int = TERMINATED_POD_THRESHOLD, check_period: float = CHECK_PERIOD,
                 quarantine: float = QUARANTINE) -> None:
        self.api, self.nodes, self.pods = api, nodes, pods
        self.name = NAME
        self.terminated_pod_threshold = terminated_pod_threshold
        self.check_period, self.quarantine = check_period, quarantine
        # Node names seen missing from the cache -> when they were first seen so (the delaying queue
        # kube keeps them in for quarantineTime).
        self._missing_since: dict[str, float] = {}

    async def gc_once(self) -> None:
        pods = self.pods.items()
        nodes = {n.metadata.name or "": n for n in self.nodes.items()}
        for pod in terminated_to_delete(pods, self.terminated_pod_threshold):
            await self._fail_and_delete(pod, "terminated")
        for pod in terminating_out_of_service(pods, nodes):
            await self._fail_and_delete(pod, "terminating on an out-of-service node")
        for pod in await self._orphaned(pods, nodes):
            await self._fail_and_delete(pod, "orphaned", condition=ORPHAN_CONDITION)
        for pod in unscheduled_terminating(pods):
            await self._fail_and_delete(pod, "unscheduled and terminating")

    async def _orphaned(self, pods: list[Pod], nodes: dict[str, Node]) -> list[Pod]:
        """gcOrphaned: pods on nodes missing from the cache for the quarantine and absent on a GET."""
        now = time.monotonic()
        for pod in pods:
            if pod.node_name and pod.node_name not in nodes:
                self._missing_since.setdefault(pod.node_name, now)
        gone: set[str] = set()
        for name, since in list(self._missing_since.items()):
            if now - since < self.quarantine:
                continue
            # Looked at once; a node still missing on the next pass starts a new quarantine, as kube's
            # nodeQueue.Done + AddAfter does.
            del self._missing_since[name]
            if name in nodes:
                continue
            try:
                await self.api.get(kinds.NODES, name)
            except ApiError as exc:
                if exc.code == 404:
                    gone.add(name)
                else:
                    log.warning("%s: getting node %s failed: %s", self.name, name, exc)
        return [p for p in pods if p.node_name in gone]

    async def _fail_and_delete(self, pod: Pod, why: str, *, condition: dict[str, Any] | None = None) -> None:
        """markFailedAndDeletePodWithCondition: a pod that has not finished becomes Failed (with the
        condition) through its status, then it is deleted with grace period 0."""
        name, namespace = pod.metadata.name or "", pod.metadata.namespace
        log.info("%s: force deleting %s pod %s", self.name, why, pod.key)
        try:
            if not pod.is_terminal():
                status: dict[str, Any] = {"phase": "Failed"}
                if condition is not None:
                    status["conditions"] = [{**condition, "lastTransitionTime": timeutil.rfc3339()}]
                # The uid pins the patch to this pod, not a namesake created since (utilpod.PatchPodStatus).
                await self.api.patch(kinds.PODS, name, {"metadata": {"uid": pod.metadata.uid}, "status": status},
                                     namespace, subresource="status",
                                     content_type="application/strategic-merge-patch+json")
            await self.api.delete(kinds.PODS, name, namespace, grace_period_seconds=0)
        except ApiError as exc:
            if exc.code != 404:
                log.warning("%s: deleting %s failed: %s", self.name, pod.key, exc)

    async def run(self) -> None:
        await self.nodes.wait_synced()
        await self.pods.wait_synced()
        while True:
            try:
                await self.gc_once()
            except Exception:  # one bad pass must not stop the collector
                log.exception("%s: pass failed", self.name)
            await asyncio.sleep(self.check_period)
