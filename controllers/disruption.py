"""The disruption controller: each PodDisruptionBudget's status, which the eviction subresource spends.

kube-controller-manager's disruption controller (pkg/controller/disruption): for every budget, the pods
its selector matches in its namespace (an empty selector matches none), how many of them are healthy
(Ready, not being deleted, not just evicted), how many must stay healthy, and so how many disruptions
are allowed now. An eviction takes one disruption and names its pod in status.disruptedPods; the pod
counts as gone from then on, until it is seen deleted or two minutes pass (DeletionTimeout: the eviction's
delete never happened). minAvailable as a number counts the matched pods; a percentage, or maxUnavailable,
scales the replicas of the pods' controllers (read through their scale subresource, as kube's finders do
for Deployments, ReplicaSets, StatefulSets, ReplicationControllers).

`compute` is pure; the controller feeds it from informers and writes the status when it changed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError, Conflict, Informer, NotFound, WorkQueue
from kubelab.models import IntOrString, OwnerReference, Pod, PodDisruptionBudget, PodDisruptionBudgetStatus
from kubelab.selectors import SelectorError, selector_from_label_selector

from .queuecontroller import QueueController

log = logging.getLogger(__name__)

DELETION_TIMEOUT = timedelta(minutes=2)


class NoController(Exception):
    """A pod of a percentage or maxUnavailable budget has no controller to scale from."""


@dataclass(frozen=True)
class Budget:
    """What a budget's numbers come to: expected pods, pods that must stay healthy, healthy pods now."""

    expected: int
    desired_healthy: int
    current_healthy: int
    disrupted: dict[str, str]
    recheck_after: float | None  # seconds until the oldest disruptedPods entry expires

    @property
    def disruptions_allowed(self) -> int:
        if self.expected <= 0:
            return 0
        return max(0, self.current_healthy - self.desired_healthy)


def selected_pods(pdb: PodDisruptionBudget, pods: list[Pod]) -> list[Pod]:
    """getPodsForPdb: an empty or broken selector selects nothing. Pure."""
    selector = pdb.spec.selector if pdb.spec else None
    if selector is None or not (selector.match_labels or selector.match_expressions):
        return []
    try:
        sel = selector_from_label_selector(selector)
    except SelectorError:
        return []
    return [p for p in pods if p.metadata.namespace == pdb.metadata.namespace and sel.matches(p.metadata.labels or {})]


def _scaled(value: IntOrString, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounded up."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def compute(pdb: PodDisruptionBudget, pods: list[Pod], now: datetime, *, scale: int | None) -> Budget:
    """The budget's status numbers from its pods. `scale`: the summed replicas of the pods' controllers,
    needed (and only read) for a percentage minAvailable or for maxUnavailable. Pure."""
    spec = pdb.spec
    minimum = spec.min_available if spec else None
    maximum = spec.max_unavailable if spec else None
    if maximum is not None:
        expected = scale or 0
        desired = max(0, expected - _scaled(maximum, expected))
    elif isinstance(minimum, int):
        expected, desired = len(pods), minimum
    elif minimum is not None:
        expected = scale or 0
        desired = _scaled(minimum, expected)
    else:
        expected, desired = len(pods), 0
    disrupted, recheck = _live_disruptions(pdb, pods, now)
    healthy = sum(1 for p in pods if not p.metadata.deletion_timestamp and p.metadata.name not in disrupted
                  and p.is_ready())
    return Budget(expected, desired, healthy, disrupted, recheck)


def _live_disruptions(pdb: PodDisruptionBudget, pods: list[Pod], now: datetime) -> tuple[dict[str, str], float | None]:
    """buildDisruptedPodMap: entries whose pod is still there, not yet deleted, and evicted less than
    DeletionTimeout ago; and when the first of those will expire."""
    by_name = {p.metadata.name: p for p in pods}
    kept: dict[str, str] = {}
    recheck: float | None = None
    for name, when in ((pdb.status.disrupted_pods if pdb.status else None) or {}).items():
        pod = by_name.get(name)
        if pod is None or pod.metadata.deletion_timestamp:
            continue
        at = timeutil.parse(when)
        if at is None:
            continue
        expires = at + DELETION_TIMEOUT
        if expires < now:
            continue
        kept[name] = when
        left = (expires - now).total_seconds()
        recheck = left if recheck is None else min(recheck, left)
    return kept, recheck


def status_of(pdb: PodDisruptionBudget, budget: Budget | None, error: str | None, now: str) -> PodDisruptionBudgetStatus:
    """The status to write: the numbers and the DisruptionAllowed condition (SufficientPods,
    InsufficientPods, or SyncFailed with every number but the disrupted pods at zero, kube's failSafe)."""
    old = pdb.status or PodDisruptionBudgetStatus()
    generation = pdb.metadata.generation or 0
    if budget is None:
        allowed, reason, message = 0, "SyncFailed", error or ""
        numbers: dict[str, int] = {"current_healthy": old.current_healthy or 0,
                                   "desired_healthy": old.desired_healthy or 0, "expected_pods": old.expected_pods or 0}
        disrupted = old.disrupted_pods
    else:
        allowed = budget.disruptions_allowed
        reason, message = ("SufficientPods", "") if allowed > 0 else ("InsufficientPods", "")
        numbers = {"current_healthy": budget.current_healthy, "desired_healthy": budget.desired_healthy,
                   "expected_pods": budget.expected}
        disrupted = budget.disrupted or None
    status = "True" if allowed > 0 else "False"
    previous = next((c for c in old.conditions or [] if c.get("type") == "DisruptionAllowed"), None)
    since = previous.get("lastTransitionTime") if previous and previous.get("status") == status else now
    condition = {"type": "DisruptionAllowed", "status": status, "observedGeneration": generation,
                 "lastTransitionTime": since, "reason": reason, "message": message}
    others = [c for c in old.conditions or [] if c.get("type") != "DisruptionAllowed"]
    return PodDisruptionBudgetStatus(observed_generation=generation, disrupted_pods=disrupted,
                                     disruptions_allowed=allowed, conditions=[*others, condition], **numbers)


def _same(a: PodDisruptionBudgetStatus | None, b: PodDisruptionBudgetStatus) -> bool:
    return a is not None and a.to_dict() == b.to_dict()


class DisruptionController(QueueController):
    name = "disruption-controller"

    def __init__(self, api: ApiClient, pods: Informer[Pod], budgets: Informer[PodDisruptionBudget]) -> None:
        self.api = api
        self.pods = pods
        self.budgets = budgets
        self.queue = WorkQueue(self.name)
        budgets.add_handler(self._on_budget)
        pods.add_handler(self._on_pod)

    def _on_budget(self, event: str, old: PodDisruptionBudget | None, new: PodDisruptionBudget | None) -> None:
        self.queue.add((new or old).key)  # type: ignore[union-attr]

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        for pod in (old, new):
            if pod is None:
                continue
            for pdb in self.budgets.items():
                if selected_pods(pdb, [pod]):
                    self.queue.add(pdb.key)

    def caches(self) -> Sequence[Informer[Any]]:
        return (self.pods, self.budgets)

    def initial_keys(self) -> Iterable[str]:
        return [pdb.key for pdb in self.budgets.items()]

    async def reconcile(self, key: str) -> None:
        pdb = self.budgets.get(key)
        if pdb is None:
            return
        namespace = pdb.metadata.namespace or ""
        pods = selected_pods(pdb, [p for p in self.pods.items() if p.metadata.namespace == namespace])
        now = timeutil.now()
        budget: Budget | None = None
        error: str | None = None
        try:
            scale = await self._expected_scale(pods) if _needs_scale(pdb) else None
            budget = compute(pdb, pods, now, scale=scale)
        except NoController as exc:
            error = str(exc)
        status = status_of(pdb, budget, error, timeutil.rfc3339(now))
        if not _same(pdb.status, status):
            try:
                await self.api.update_status(kinds.PODDISRUPTIONBUDGETS, pdb.model_copy(update={"status": status}))
            except NotFound:
                return
            except Conflict:
                self.queue.add_rate_limited(key)  # an eviction wrote first: recompute from what it wrote
                return
        if budget is not None and budget.recheck_after is not None:
            self.queue.add_after(key, budget.recheck_after + 1)

    async def _expected_scale(self, pods: list[Pod]) -> int:
        """getExpectedScale: the replicas of each distinct controller of the pods (a ReplicaSet owned by a
        Deployment counts as the Deployment), read through the controllers' scale subresource."""
        total, seen = 0, set()
        for pod in pods:
            ref = _controller_ref(pod.metadata.owner_references)
            if ref is None:
                raise NoController(f"found no controller ref for pod {pod.metadata.name!r}")
            owner = await self._scalable_owner(ref, pod.metadata.namespace or "")
            if owner is None or owner[0] in seen:
                continue
            seen.add(owner[0])
            total += owner[1]
        return total

    async def _scalable_owner(self, ref: OwnerReference, namespace: str) -> tuple[str, int] | None:
        rt = kinds.by_kind(ref.api_version or "", ref.kind or "")
        if rt is None or "scale" not in rt.subresources:
            raise NoController(f"{ref.kind} {ref.name} has no scale subresource")
        try:
            obj = await self.api.get(rt, ref.name or "", namespace)
            parent = _controller_ref(obj.metadata.owner_references)
            if rt == kinds.REPLICASETS and parent is not None and parent.kind == "Deployment":
                return await self._scalable_owner(parent, namespace)
            scale = await self.api.request("GET", rt.path(namespace, ref.name, "scale"))
        except NotFound:
            return None
        except ApiError as exc:
            raise NoController(str(exc)) from exc
        return obj.metadata.uid or "", int(((scale or {}).get("spec") or {}).get("replicas") or 0)


def _needs_scale(pdb: PodDisruptionBudget) -> bool:
    spec = pdb.spec
    return spec is not None and (spec.max_unavailable is not None or isinstance(spec.min_available, str))


def _controller_ref(refs: list[OwnerReference] | None) -> OwnerReference | None:
    return next((r for r in refs or [] if r.controller), None)
