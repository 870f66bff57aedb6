"""The DaemonSet controller: one pod of the template on every eligible node (kube's pkg/controller/daemon).

Which nodes are eligible is pure (`should_run`): the template's nodeSelector and required node affinity
must match, and every NoSchedule/NoExecute taint must be tolerated, counting the tolerations every
DaemonSet pod gets (not-ready and unreachable NoExecute; disk-, memory-, pid-pressure and unschedulable
NoSchedule; network-unavailable for hostNetwork pods). An untolerated NoSchedule taint stops a new pod
but lets a running one stay; an untolerated NoExecute taint evicts it. Pods are placed as kube 1.12+
places them: pinned by a required `metadata.name In [node]` node affinity term, so the default
scheduler binds them (and sees their taints and resources) rather than the controller.

A sync claims the DaemonSet's pods, records the template in a ControllerRevision (`controller-revision-
hash`, so `kubectl rollout history/undo ds/x` work), creates the missing pods and deletes the surplus
ones (`plan_nodes`), then — RollingUpdate — replaces old pods within maxUnavailable or by surging within
maxSurge (`plan_rolling_update`); OnDelete leaves old pods until someone deletes them. Then the status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubelab import kinds, nodeaffinity, timeutil
from kubelab.client import ApiClient, ApiError, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import (
    ControllerRevision,
    DaemonSet,
    DaemonSetStatus,
    Node,
    Pod,
    PodSpec,
    Toleration,
)
from kubelab.selectors import SelectorError, selector_from_label_selector

from . import history
from .expectations import Expectations
from .informers import SharedInformers
from .ownership import claim_all, controller_ref, new_controller_ref
from .queuecontroller import QueueController
from .replicaset import is_pod_available, slow_start_batches
from .rollout import scaled_value
from .statuswrite import write_status

log = logging.getLogger(__name__)

TEMPLATE_GENERATION_LABEL = "pod-template-generation"
BURST_REPLICAS = 250

# AddOrUpdateDaemonPodTolerations: what every DaemonSet pod tolerates, whatever its template says.
DEFAULT_TOLERATIONS = (
    Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/disk-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/pid-pressure", operator="Exists", effect="NoSchedule"),
    Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
)
HOST_NETWORK_TOLERATION = Toleration(key="node.kubernetes.io/network-unavailable", operator="Exists",
                                     effect="NoSchedule")


# --- pure: where daemon pods belong --------------------------------------------------------------

def daemon_tolerations(spec: PodSpec | None) -> list[Toleration]:
    """The template's tolerations plus the defaults it does not already have (by key and effect)."""
    tolerations = list((spec.tolerations if spec else None) or [])
    defaults = list(DEFAULT_TOLERATIONS)
    if spec is not None and spec.host_network:
        defaults.append(HOST_NETWORK_TOLERATION)
    for default in defaults:
        if not any(t.key == default.key and t.effect == default.effect for t in tolerations):
            tolerations.append(default)
    return tolerations


def should_run(ds: DaemonSet, node: Node) -> tuple[bool, bool]:
    """NodeShouldRunDaemonPod: (should a new daemon pod be placed here, may a running one stay)."""
    template = ds.spec.template if ds.spec else None
    spec = template.spec if template else None
    if spec is not None and spec.node_name and spec.node_name != node.metadata.name:
        return False, False
    if not nodeaffinity.matches_node(spec, node):
        return False, False
    taints = node.spec.taints if node.spec else None
    tolerations = daemon_tolerations(spec)
    if nodeaffinity.untolerated_taints(taints, tolerations, ("NoExecute",)):
        return False, False
    if nodeaffinity.untolerated_taints(taints, tolerations, ("NoSchedule",)):
        return False, True
    return True, True


def target_node(pod: Pod) -> str:
    """util.GetTargetNodeName: the node a pod is bound to, or pinned to before it is bound."""
    return pod.node_name or nodeaffinity.pinned_node_name(pod.spec) or ""


def _created(pod: Pod) -> tuple[str, str]:
    return pod.metadata.creation_timestamp or "", pod.metadata.name or ""


def is_updated(pod: Pod, revision_hash: str) -> bool:
    return (pod.metadata.labels or {}).get(history.HASH_LABEL) == revision_hash


@dataclass
class NodePlan:
    """What the manage step does: nodes that need a pod, pods to delete (by name), and failed pods to
    delete as (node, pod name) once the node's failed-pod backoff allows it."""

    create_on: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


class FailedPodBackoff:
    """failedPodsBackoff: per DaemonSet and node, a failed pod is deleted (and so replaced) at most once per
    delay, which doubles from 1 s to 15 min — a kubelet that rejects every pod must not meet a hot loop of
    creations. The clock is injected."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, initial: float = 1.0,
                 maximum: float = 900.0) -> None:
        self.clock = clock
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (delay, last update)

    def remaining(self, key: str) -> float:
        """Seconds until the key may act again (0: now), as IsInBackOffSinceUpdate."""
        entry = self._entries.get(key)
        if entry is None:
            return 0.0
        delay, since = entry
        return max(0.0, since + delay - self.clock())

    def next(self, key: str) -> None:
        entry = self._entries.get(key)
        now = self.clock()
        if entry is None or now - entry[1] > 2 * self.maximum:
            self._entries[key] = (self.initial, now)
        else:
            self._entries[key] = (min(entry[0] * 2, self.maximum), now)


def allows_surge(ds: DaemonSet) -> bool:
    strategy = ds.spec.update_strategy if ds.spec else None
    if strategy is None or strategy.type != "RollingUpdate" or strategy.rolling_update is None:
        return False
    return scaled_value(strategy.rolling_update.max_surge, 1, round_up=True) != 0


def plan_nodes(ds: DaemonSet, nodes: list[Node], pods_by_node: dict[str, list[Pod]], revision_hash: str,
               now: datetime) -> NodePlan:
    """manage(): for each node, a pod where one should run and none runs; the pods of nodes that may
    not keep them; failed pods (they are replaced); and duplicates — the oldest pod stays, or, when the
    DaemonSet surges, the oldest updated pod and the oldest old one until the updated one is available."""
    plan = NodePlan()
    min_ready = (ds.spec.min_ready_seconds if ds.spec else None) or 0
    known = set()
    for node in sorted(nodes, key=lambda n: n.metadata.name or ""):
        name = node.metadata.name or ""
        known.add(name)
        run, keep = should_run(ds, node)
        # A finished pod already being deleted is no longer the node's (getNodesToDaemonPods); any other
        # pod, a terminating one included, is: a replacement waits until it is gone.
        pods = [p for p in pods_by_node.get(name, []) if not (p.is_terminal() and p.metadata.deletion_timestamp)]
        if not pods:
            if run:
                plan.create_on.append(name)
            continue
        if not keep:
            plan.delete += [p.metadata.name or "" for p in pods if not p.metadata.deletion_timestamp]
            continue
        running = []
        for pod in pods:
            if pod.metadata.deletion_timestamp:
                continue
            if pod.phase == "Failed":
                plan.failed.append((name, pod.metadata.name or ""))
            elif pod.phase == "Succeeded":
                plan.delete.append(pod.metadata.name or "")
            else:
                running.append(pod)
        if len(running) <= 1:
            continue
        running.sort(key=_created)
        if allows_surge(ds):
            oldest_new = next((p for p in running if is_updated(p, revision_hash)), None)
            oldest_old = next((p for p in running if not is_updated(p, revision_hash)), None)
            plan.delete += [p.metadata.name or "" for p in running if p is not oldest_new and p is not oldest_old]
            if oldest_new is not None and oldest_old is not None and (
                    not oldest_old.is_ready() or is_pod_available(oldest_new, min_ready, now)):
                plan.delete.append(oldest_old.metadata.name or "")
        else:
            plan.delete += [p.metadata.name or "" for p in running[1:]]
    for name, pods in sorted(pods_by_node.items()):
        if name not in known:  # the node is gone (or the pod names one that never existed)
            plan.delete += [p.metadata.name or "" for p in pods if not p.metadata.deletion_timestamp]
    return plan


def _updated_and_old(pods: list[Pod], revision_hash: str) -> tuple[Pod | None, Pod | None, bool]:
    """findUpdatedPodsOnNode: the one updated and the one old pod of a node; False if there are more."""
    new = old = None
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue
        if is_updated(pod, revision_hash):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def fenceposts(ds: DaemonSet, desired: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) against the number of nodes that should run a pod, both rounded up;
    both 0 would stall the rollout, so then one pod may be unavailable."""
    strategy = ds.spec.update_strategy if ds.spec else None
    ru = strategy.rolling_update if strategy else None
    surge = scaled_value(ru.max_surge if ru else 0, desired, round_up=True)
    unavailable = scaled_value(ru.max_unavailable if ru else 1, desired, round_up=True)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def plan_rolling_update(ds: DaemonSet, pods_by_node: dict[str, list[Pod]], revision_hash: str, desired: int,
                        now: datetime) -> NodePlan:
    """rollingUpdate(): without surge, delete old pods (the manage step replaces them) while no more than
    maxUnavailable nodes lack an available pod — an old pod that is not available anyway goes at once;
    with surge, start an updated pod beside old ones on up to maxSurge nodes, and delete each old pod once
    the updated pod beside it is available. Nodes are taken in name order."""
    surge, max_unavailable = fenceposts(ds, desired)
    min_ready = (ds.spec.min_ready_seconds if ds.spec else None) or 0
    plan = NodePlan()
    if surge == 0:
        unavailable = 0
        allowed: list[str] = []
        candidates: list[str] = []
        for _, pods in sorted(pods_by_node.items()):
            new, old, ok = _updated_and_old(pods, revision_hash)
            if not ok or (new is None) == (old is None):
                unavailable += 1  # the manage step creates or deletes here first
            elif new is not None:
                if not is_pod_available(new, min_ready, now):
                    unavailable += 1
            elif old is not None:
                if not is_pod_available(old, min_ready, now):
                    allowed.append(old.metadata.name or "")
                elif unavailable < max_unavailable:
                    candidates.append(old.metadata.name or "")
        remaining = min(max(max_unavailable - unavailable, 0), len(candidates))
        plan.delete = allowed + candidates[:remaining]
        return plan
    surged = 0
    allowed_nodes: list[str] = []
    candidate_nodes: list[str] = []
    for node, pods in sorted(pods_by_node.items()):
        new, old, ok = _updated_and_old(pods, revision_hash)
        if not ok:
            surged += 1
            continue
        if old is None:
            continue
        if new is None:
            if not is_pod_available(old, min_ready, now):
                allowed_nodes.append(node)
            elif surged < surge:
                candidate_nodes.append(node)
            continue
        if not is_pod_available(new, min_ready, now):
            surged += 1
            continue
        plan.delete.append(old.metadata.name or "")
    remaining = min(max(surge - surged, 0), len(candidate_nodes))
    plan.create_on = allowed_nodes + candidate_nodes[:remaining]
    return plan


def calculate_status(ds: DaemonSet, nodes: list[Node], pods_by_node: dict[str, list[Pod]], revision_hash: str,
                     now: datetime) -> DaemonSetStatus:
    """updateDaemonSetStatus: counted over the nodes that should run a pod, from each one's oldest pod."""
    desired = current = misscheduled = ready = available = updated = 0
    min_ready = (ds.spec.min_ready_seconds if ds.spec else None) or 0
    for node in nodes:
        run, _ = should_run(ds, node)
        pods = sorted((p for p in pods_by_node.get(node.metadata.name or "", []) if not p.metadata.deletion_timestamp),
                      key=_created)
        if run:
            desired += 1
            if pods:
                current += 1
                pod = pods[0]
                if pod.is_ready():
                    ready += 1
                    if is_pod_available(pod, min_ready, now):
                        available += 1
                if any(is_updated(p, revision_hash) for p in pods):
                    updated += 1
        elif pods:
            misscheduled += 1
    old = ds.status or DaemonSetStatus()
    return DaemonSetStatus(current_number_scheduled=current, number_misscheduled=misscheduled,
                           desired_number_scheduled=desired, number_ready=ready, updated_number_scheduled=updated,
                           number_available=available, number_unavailable=desired - available,
                           observed_generation=ds.metadata.generation, collision_count=old.collision_count,
                           conditions=old.conditions)


def pod_for_node(ds: DaemonSet, node_name: str, revision_hash: str) -> dict[str, Any]:
    """The template with the revision's labels, the default tolerations, and its required node affinity
    replaced by one `metadata.name In [node]` term (ReplaceDaemonSetPodNodeNameNodeAffinity)."""
    template = ds.spec.template if ds.spec else None
    meta = template.metadata.to_dict() if template and template.metadata else {}
    spec = template.spec.model_copy(deep=True) if template and template.spec else PodSpec()
    spec.tolerations = daemon_tolerations(spec)
    affinity = dict(spec.affinity or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    affinity["nodeAffinity"] = node_affinity
    spec.affinity = affinity
    labels = {**(meta.get("labels") or {}), history.HASH_LABEL: revision_hash,
              TEMPLATE_GENERATION_LABEL: str(ds.metadata.generation or 1)}
    metadata: dict[str, Any] = {"generateName": f"{ds.metadata.name}-", "namespace": ds.metadata.namespace,
                                "labels": labels, "ownerReferences": [new_controller_ref(ds).to_dict()]}
    for key in ("annotations", "finalizers"):
        if meta.get(key):
            metadata[key] = meta[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec.to_dict()}


# --- the controller ----------------------------------------------------------------------------

class DaemonSetController(QueueController):
    name = "daemonset-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers) -> None:
        self.api = api
        self.informers = informers
        self.daemonsets = informers.daemonsets
        self.queue = WorkQueue(self.name)
        self.expectations = Expectations()
        self.failed_backoff = FailedPodBackoff()
        self.events = EventRecorder(api, self.name)
        self.daemonsets.add_handler(self._on_daemonset)
        informers.pods.add_handler(self._on_pod)
        informers.nodes.add_handler(self._on_node)
        informers.controllerrevisions.add_handler(self._on_revision)

    def initial_keys(self) -> Iterable[str]:
        return [ds.key for ds in self.daemonsets.items()]

    def _on_daemonset(self, event: str, old: DaemonSet | None, new: DaemonSet | None) -> None:
        ds = new or old
        assert ds is not None
        if new is None:
            self.expectations.forget(ds.key)
        self.queue.add(ds.key)

    def _owner(self, obj: Any) -> DaemonSet | None:
        ref = controller_ref(obj)
        if ref is None or ref.kind != "DaemonSet":
            return None
        ds = self.daemonsets.get(f"{obj.metadata.namespace}/{ref.name}")
        return ds if ds is not None and ds.metadata.uid == ref.uid else None

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        assert pod is not None
        ds = self._owner(pod)
        if ds is None:
            if new is not None and controller_ref(new) is None:
                for candidate in self._selecting(new):
                    self.queue.add(candidate.key)
            return
        if new is None or (new.metadata.deletion_timestamp and (old is None or not old.metadata.deletion_timestamp)):
            self.expectations.deletion_observed(ds.key, pod.key)
        elif old is None:
            self.expectations.creation_observed(ds.key)
        self.queue.add(ds.key)

    def _selecting(self, pod: Pod) -> list[DaemonSet]:
        found = []
        for ds in self.daemonsets.items():
            if ds.metadata.namespace != pod.metadata.namespace or not ds.spec:
                continue
            try:
                if selector_from_label_selector(ds.spec.selector).matches(pod.metadata.labels):
                    found.append(ds)
            except SelectorError:
                continue
        return found

    def _on_node(self, event: str, old: Node | None, new: Node | None) -> None:
        if old is not None and new is not None and (old.metadata.labels, old.spec) == (new.metadata.labels, new.spec):
            return  # a heartbeat: where daemon pods belong depends on labels and taints only
        for ds in self.daemonsets.items():
            self.queue.add(ds.key)

    def _on_revision(self, event: str, old: ControllerRevision | None, new: ControllerRevision | None) -> None:
        ds = self._owner(new or old)
        if ds is not None and new is None:
            self.queue.add(ds.key)

    # sync

    async def reconcile(self, key: str) -> None:
        cached = self.daemonsets.get(key)
        if cached is None:
            self.expectations.forget(key)
            return
        ds = cached.model_copy(deep=True)
        try:
            selector = selector_from_label_selector(ds.spec.selector if ds.spec else None)
        except SelectorError as exc:
            log.warning("daemonset %s: invalid selector: %s", key, exc)
            return
        namespace = ds.metadata.namespace or ""
        candidates = [p for p in self.informers.pods_in(namespace)]
        owned = await claim_all(self.api, ds, kinds.DAEMONSETS, candidates, kinds.PODS,
                                lambda pod: selector.matches(pod.metadata.labels), what="pods")
        if ds.metadata.deletion_timestamp:
            return
        revisions = await history.claim_revisions(self.api, ds, kinds.DAEMONSETS,
                                                  self.informers.controllerrevisions.items(), selector)
        try:
            current, revisions = await history.sync_revisions(
                self.api, ds, ds.spec.template if ds.spec else None, revisions,
                collision_count=ds.status.collision_count if ds.status else None)
        except history.HashCollision:
            status = (ds.status or DaemonSetStatus()).model_copy(deep=True)
            status.collision_count = (status.collision_count or 0) + 1
            await self.api.update_status(kinds.DAEMONSETS, ds.model_copy(update={"status": status}))
            raise
        revision_hash = (current.metadata.labels or {}).get(history.HASH_LABEL, "")
        nodes = list(self.informers.nodes.items())
        pods_by_node: dict[str, list[Pod]] = {}
        for pod in owned:
            pods_by_node.setdefault(target_node(pod), []).append(pod)
        now = timeutil.now()
        error: BaseException | None = None
        if self.expectations.satisfied(key):
            plan = plan_nodes(ds, nodes, pods_by_node, revision_hash, now)
            strategy = ds.spec.update_strategy if ds.spec else None
            if not plan.create_on and not plan.delete and strategy is not None and strategy.type == "RollingUpdate":
                desired = sum(1 for n in nodes if should_run(ds, n)[0])
                plan = plan_rolling_update(ds, pods_by_node, revision_hash, desired, now)
            plan.delete += self._failed_to_delete(ds, plan.failed)
            error = await self._sync_nodes(ds, plan, owned, revision_hash)
            live = {(p.metadata.labels or {}).get(history.HASH_LABEL, "") for p in owned}
            # revisionHistoryLimit old revisions are kept besides the current one.
            limit = ds.spec.revision_history_limit if ds.spec and ds.spec.revision_history_limit is not None else 10
            stale = history.to_truncate(revisions, limit=limit + 1, live_hashes=live,
                                        keep={current.metadata.name or ""})
            await history.delete_revisions(self.api, stale)
        status = calculate_status(ds, nodes, pods_by_node, revision_hash, now)
        await write_status(self.api, kinds.DAEMONSETS, ds, status)
        min_ready = (ds.spec.min_ready_seconds if ds.spec else None) or 0
        if min_ready and status.number_ready != status.number_available:
            self.queue.add_after(key, min_ready + 1)  # pods become available by the clock
        if error is not None:
            raise error

    def _failed_to_delete(self, ds: DaemonSet, failed: list[tuple[str, str]]) -> list[str]:
        """The failed pods whose node's backoff allows deleting them now; the others are looked at again
        when it does."""
        names = []
        for node, pod_name in failed:
            key = f"{ds.metadata.uid}/{node}"
            wait = self.failed_backoff.remaining(key)
            if wait > 0:
                self.queue.add_after(ds.key, wait)
                continue
            self.failed_backoff.next(key)
            self.events.event(ds, "Warning", "FailedDaemonPod", f"Found failed daemon pod {ds.metadata.namespace}/"
                                                                 f"{pod_name} on node {node}, will try to kill it")
            names.append(pod_name)
        return names

    async def _sync_nodes(self, ds: DaemonSet, plan: NodePlan, owned: list[Pod], revision_hash: str
                          ) -> BaseException | None:
        key = ds.key
        create_on = plan.create_on[:BURST_REPLICAS]
        by_name = {p.metadata.name: p for p in owned}
        victims = [by_name[n] for n in plan.delete[:BURST_REPLICAS] if n in by_name]
        self.expectations.expect(key, adds=len(create_on), deletes=[p.key for p in victims])
        error: BaseException | None = None
        if create_on:
            remaining = list(create_on)
            for size in slow_start_batches(len(create_on)):
                batch, remaining = remaining[:size], remaining[size:]
                results = await asyncio.gather(*(self._create(ds, node, revision_hash) for node in batch),
                                               return_exceptions=True)
                errors = [r for r in results if isinstance(r, BaseException)]
                for _ in errors:
                    self.expectations.creation_observed(key)
                if errors:
                    error = errors[0]
                    for _ in remaining:
                        self.expectations.creation_observed(key)
                    break
        results = await asyncio.gather(*(self._delete(ds, pod) for pod in victims), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        return error or (errors[0] if errors else None)

    async def _create(self, ds: DaemonSet, node: str, revision_hash: str) -> None:
        try:
            pod = await self.api.create(kinds.PODS, pod_for_node(ds, node, revision_hash), ds.metadata.namespace)
        except ApiError as exc:
            if exc.code == 403 and "is being terminated" in exc.message:
                return
            self.events.event(ds, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            raise
        self.events.event(ds, "Normal", "SuccessfulCreate", f"Created pod: {pod.metadata.name}")

    async def _delete(self, ds: DaemonSet, pod: Pod) -> None:
        try:
            await self.api.delete(kinds.PODS, pod.metadata.name or "", pod.metadata.namespace)
        except NotFound:
            self.expectations.deletion_observed(ds.key, pod.key)
            return
        except ApiError as exc:
            self.expectations.deletion_observed(ds.key, pod.key)
            self.events.event(ds, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
            raise
        self.events.event(ds, "Normal", "SuccessfulDelete", f"Deleted pod: {pod.metadata.name}")
