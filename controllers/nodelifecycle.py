"""The node lifecycle controller: notices nodes that stopped heartbeating, and says so (reference §7).

Every `monitor_period` it looks at each Node's heartbeats — its Lease's renewTime in kube-node-lease
and its Ready condition's lastHeartbeatTime. A node silent for longer than `grace_period` (or
`startup_grace_period` if it never posted a Ready condition) gets its Ready, MemoryPressure,
DiskPressure and PIDPressure conditions set to Unknown, "Kubelet stopped posting node status.".
Conditions are mirrored into taints on every pass: Ready False -> node.kubernetes.io/not-ready, Ready
Unknown -> node.kubernetes.io/unreachable (NoSchedule, and NoExecute with timeAdded), and
spec.unschedulable -> node.kubernetes.io/unschedulable:NoSchedule. When a node stops being Ready its
pods are marked not ready (their Ready condition becomes False), so the endpoints controllers drop
them and every proxy agent drops their rules.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError, Informer
from kubelab.events import EventRecorder
from kubelab.models import Lease, Node, NodeCondition, Pod, Taint

log = logging.getLogger(__name__)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MONITORED = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


def desired_taints(node: Node, now: str) -> list[Taint]:
    """The node's taints with the condition-driven ones brought in line with its conditions. Pure."""
    ready = node.condition("Ready")
    status = ready.status if ready is not None else None
    managed = {NOT_READY, UNREACHABLE, UNSCHEDULABLE}
    current = (node.spec.taints if node.spec else None) or []
    keep = [t for t in current if t.key not in managed]
    old = {(t.key, t.effect): t for t in current if t.key in managed}
    wanted: list[tuple[str, str]] = []
    if status == "False":
        wanted += [(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")]
    elif status == "Unknown":
        wanted += [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")]
    if node.spec and node.spec.unschedulable:
        wanted.append((UNSCHEDULABLE, "NoSchedule"))
    for key, effect in wanted:
        taint = old.get((key, effect)) or Taint(key=key, effect=effect, time_added=now if effect == "NoExecute" else None)
        keep.append(taint)
    return keep


def unknown_conditions(node: Node, now: str) -> list[NodeCondition]:
    """Conditions after a missed heartbeat: monitored ones Unknown, missing ones added (§7)."""
    conditions = list((node.status.conditions if node.status else None) or [])
    present = {c.type for c in conditions}
    result = []
    for cond in conditions:
        if cond.type in MONITORED and cond.status != "Unknown":
            cond = cond.model_copy(update={"status": "Unknown", "reason": "NodeStatusUnknown",
                                           "message": "Kubelet stopped posting node status.",
                                           "last_transition_time": now})
        result.append(cond)
    for type_ in MONITORED:
        if type_ not in present:
            result.append(NodeCondition(type=type_, status="Unknown", reason="NodeStatusNeverUpdated",
                                        message="Kubelet never posted node status.",
                                        last_heartbeat_time=node.metadata.creation_timestamp,
                                        last_transition_time=now))
    return result


@dataclass
class _Health:
    heartbeat: str | None = None
    lease_renew: str | None = None
    probed_at: float = 0.0
    ready: str | None = None


class NodeLifecycleController:
    name = "node-lifecycle-controller"

    def __init__(self, api: ApiClient, nodes: Informer[Node], pods: Informer[Pod], *, monitor_period: float = 5.0,
                 grace_period: float = 50.0, startup_grace_period: float = 60.0) -> None:
        self.api = api
        self.nodes = nodes
        self.pods = pods
        self.leases: Informer[Lease] = Informer(api, kinds.LEASES, namespace="kube-node-lease",
                                                name="controllers-node-leases")
        self.monitor_period = monitor_period
        self.grace_period = grace_period
        self.startup_grace_period = startup_grace_period
        self.events = EventRecorder(api, "node-controller")
        self._health: dict[str, _Health] = {}

    def _observe(self, node: Node, now: float) -> _Health:
        """Refresh the probe time when either heartbeat moved (tryUpdateNodeHealth)."""
        name = node.metadata.name or ""
        health = self._health.get(name)
        ready = node.condition("Ready")
        heartbeat = ready.last_heartbeat_time if ready is not None else None
        lease = self.leases.get(f"kube-node-lease/{name}")
        renew = lease.spec.renew_time if lease is not None and lease.spec else None
        if health is None:
            health = _Health(heartbeat, renew, now, ready.status if ready else None)
            self._health[name] = health
            self.events.event(node, "Normal", "RegisteredNode", f"Node {name} event: Registered Node {name} in "
                                                                 "Controller")
        elif heartbeat != health.heartbeat or (renew is not None and renew != health.lease_renew):
            health.heartbeat, health.lease_renew, health.probed_at = heartbeat, renew, now
        return health

    async def monitor_once(self) -> None:
        now = time.monotonic()
        stamp = timeutil.rfc3339()
        for node in self.nodes.items():
            name = node.metadata.name or ""
            health = self._observe(node, now)
            ready = node.condition("Ready")
            grace = self.grace_period if ready is not None else self.startup_grace_period
            if now - health.probed_at > grace and (ready is None or ready.status != "Unknown"):
                log.info("node-lifecycle: %s stopped posting status %.0fs ago; marking it Unknown", name,
                         now - health.probed_at)
                node.status.conditions = unknown_conditions(node, stamp)  # type: ignore[union-attr]
                try:
                    node = await self.api.update_status(kinds.NODES, node)
                except ApiError as exc:
                    log.debug("node-lifecycle: updating %s failed: %s", name, exc)
                    continue
                ready = node.condition("Ready")
            status = ready.status if ready is not None else None
            if health.ready == "True" and status != "True":
                self.events.event(node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")
            health.ready = status
            await self._reconcile_taints(node, stamp)
            if status in ("False", "Unknown"):
                await self._mark_pods_not_ready(node)

    async def _reconcile_taints(self, node: Node, now: str) -> None:
        taints = desired_taints(node, now)
        current = (node.spec.taints if node.spec else None) or []
        if [(t.key, t.effect) for t in taints] == [(t.key, t.effect) for t in current]:
            return
        try:
            await self.api.patch(kinds.NODES, node.metadata.name or "",
                                 {"spec": {"taints": [t.to_dict() for t in taints] or None}})
        except ApiError as exc:
            log.debug("node-lifecycle: tainting %s failed: %s", node.metadata.name, exc)

    async def _mark_pods_not_ready(self, node: Node) -> None:
        """MarkPodsNotReady: the Ready condition of every pod on the node becomes False."""
        for pod in self.pods.items():
            if pod.node_name != node.metadata.name or pod.is_terminal() or not pod.is_ready():
                continue
            condition = {"type": "Ready", "status": "False", "lastProbeTime": None,
                         "lastTransitionTime": timeutil.rfc3339()}
            try:
                await self.api.patch(kinds.PODS, pod.metadata.name or "", {"status": {"conditions": [condition]}},
                                     pod.metadata.namespace, subresource="status",
                                     content_type="application/strategic-merge-patch+json")
                self.events.event(pod, "Warning", "NodeNotReady", "Node is not ready")
                log.info("node-lifecycle: %s on unready node %s marked not ready", pod.key, node.metadata.name)
            except ApiError as exc:
                log.debug("node-lifecycle: marking %s not ready failed: %s", pod.key, exc)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.leases.run(), name="controllers-node-leases-informer")
            await self.leases.wait_synced()
            await self.nodes.wait_synced()
            await self.pods.wait_synced()
            while True:
                try:
                    await self.monitor_once()
                except Exception:  # one bad pass must not stop monitoring
                    log.exception("node-lifecycle: monitoring pass failed")
                await asyncio.sleep(self.monitor_period)
