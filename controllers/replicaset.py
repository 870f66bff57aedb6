"""The ReplicaSet controller: keep `spec.replicas` active pods that match the selector.

kube's pkg/controller/replicaset. Each sync claims the namespace's active pods (adopting matching
orphans, releasing owned pods that stopped matching), creates the missing pods from the template in
slow-start batches (1, 2, 4, ...) or deletes the surplus, most deletable first (`rank_for_deletion`),
and writes the status. Expectations keep a burst of syncs from creating or deleting twice before the
informer has seen the first writes. The ranking, availability and status are pure functions.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError, Conflict, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import OwnerReference, Pod, ReplicaSet, ReplicaSetStatus
from kubelab.selectors import SelectorError, selector_from_label_selector, selector_from_map

from .expectations import Expectations
from .informers import SharedInformers
from .ownership import claim_all, controller_ref, new_controller_ref
from .queuecontroller import QueueController

log = logging.getLogger(__name__)

BURST_REPLICAS = 500
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


# --- pure: which pods count, which go first --------------------------------------------------------

def is_pod_active(pod: Pod) -> bool:
    """controller.IsPodActive: not Succeeded/Failed and not being deleted."""
    return not pod.is_terminal() and not pod.metadata.deletion_timestamp


def ready_since(pod: Pod) -> datetime | None:
    cond = pod.condition("Ready")
    return timeutil.parse(cond.last_transition_time) if cond is not None and cond.status == "True" else None


def is_pod_available(pod: Pod, min_ready_seconds: int, now: datetime) -> bool:
    """podutil.IsPodAvailable: ready, and (with minReadySeconds) ready for at least that long."""
    if not pod.is_ready():
        return False
    if not min_ready_seconds:
        return True
    since = ready_since(pod)
    return since is not None and (now - since).total_seconds() >= min_ready_seconds


def _deletion_cost(pod: Pod) -> int:
    text = (pod.metadata.annotations or {}).get(DELETION_COST_ANNOTATION)
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def _max_restarts(pod: Pod) -> int:
    statuses = (pod.status.container_statuses if pod.status else None) or []
    return max((s.restart_count or 0 for s in statuses), default=0)


def _log_rank(t: datetime, now: datetime) -> int:
    """floor(log2(now - t)) in nanoseconds, as Go's logarithmicRankDiff computes it; -1 for t >= now."""
    nanos = int((now - t).total_seconds() * 1e9)
    return int(math.log2(nanos)) if nanos > 0 else -1


def _later_or_zero(t1: datetime | None, t2: datetime | None) -> bool:
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _compare_times(a: Pod, b: Pod, ta: datetime | None, tb: datetime | None, now: datetime) -> bool | None:
    if ta == tb:
        return None
    if ta is None or tb is None:
        return _later_or_zero(ta, tb)
    diff = _log_rank(ta, now) - _log_rank(tb, now)
    if diff == 0:
        return (a.metadata.uid or "") < (b.metadata.uid or "")
    return diff < 0


def _deletes_first(a: Pod, b: Pod, rank_a: int, rank_b: int, now: datetime) -> bool:
    """ActivePodsWithRanks.Less: whether `a` should be deleted before `b`."""
    if a.node_name != b.node_name and (not a.node_name or not b.node_name):
        return not a.node_name  # 1. unscheduled first
    pa, pb = _PHASE_ORDINAL.get(a.phase, 0), _PHASE_ORDINAL.get(b.phase, 0)
    if pa != pb:
        return pa < pb  # 2. Pending < Unknown < Running
    if a.is_ready() != b.is_ready():
        return not a.is_ready()  # 3. not ready first
    ca, cb = _deletion_cost(a), _deletion_cost(b)
    if ca != cb:
        return ca < cb  # 4. lower pod-deletion-cost first
    if rank_a != rank_b:
        return rank_a > rank_b  # 5. more doubled-up first
    if a.is_ready() and b.is_ready():  # 6. ready for less time first
        verdict = _compare_times(a, b, ready_since(a), ready_since(b), now)
        if verdict is not None:
            return verdict
    ra, rb = _max_restarts(a), _max_restarts(b)
    if ra != rb:
        return ra > rb  # 7. more restarts first
    # 8. newer first (the empty timestamp before all)
    verdict = _compare_times(a, b, timeutil.parse(a.metadata.creation_timestamp),
                             timeutil.parse(b.metadata.creation_timestamp), now)
    return bool(verdict)


def rank_for_deletion(pods: list[Pod], related: list[Pod], now: datetime) -> list[Pod]:
    """`pods` sorted most deletable first. A pod's rank is the number of active `related` pods (those of
    every ReplicaSet with the same controller) on its node, so a node running two copies loses one
    first. Pure."""
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            on_node[pod.node_name] = on_node.get(pod.node_name, 0) + 1
    ranks = {id(p): on_node.get(p.node_name, 0) for p in pods}

    def compare(a: Pod, b: Pod) -> int:
        if _deletes_first(a, b, ranks[id(a)], ranks[id(b)], now):
            return -1
        if _deletes_first(b, a, ranks[id(b)], ranks[id(a)], now):
            return 1
        return 0

    return sorted(pods, key=functools.cmp_to_key(compare))


def pods_to_delete(pods: list[Pod], related: list[Pod], count: int, now: datetime) -> list[Pod]:
    """getPodsToDelete: all of them without ranking when every pod goes."""
    if count < len(pods):
        pods = rank_for_deletion(pods, related, now)
    return pods[:count]


def slow_start_batches(count: int, initial: int = 1) -> list[int]:
    """The batch sizes of slowStartBatch: 1, 2, 4, ... capped by what remains. 5 -> [1, 2, 2]."""
    sizes, remaining, size = [], count, min(count, initial)
    while size > 0:
        sizes.append(size)
        remaining -= size
        size = min(2 * size, remaining)
    return sizes


def calculate_status(rs: ReplicaSet, pods: list[Pod], manage_error: str | None, now: datetime,
                     *, failure_reason: str = "") -> ReplicaSetStatus:
    """calculateStatus over the claimed active pods; the ReplicaFailure condition is added on an error
    (when none is there yet) and removed on success. Zero counts are left out, as Go's omitempty does,
    except `replicas`, which is always written. Pure."""
    spec = rs.spec
    template_labels = ((spec.template.metadata.labels if spec and spec.template and spec.template.metadata
                        else None) or {})
    template_selector = selector_from_map(template_labels)
    min_ready = (spec.min_ready_seconds if spec else None) or 0
    fully, ready, available = 0, 0, 0
    for pod in pods:
        if template_selector.matches(pod.metadata.labels):
            fully += 1
        if pod.is_ready():
            ready += 1
            if is_pod_available(pod, min_ready, now):
                available += 1
    conditions = list((rs.status.conditions if rs.status else None) or [])
    failure = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    if manage_error is not None and failure is None:
        conditions.append({"type": "ReplicaFailure", "status": "True",
                           "lastTransitionTime": timeutil.rfc3339(now), "reason": failure_reason,
                           "message": manage_error})
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    return ReplicaSetStatus(replicas=len(pods), fully_labeled_replicas=fully or None,
                            ready_replicas=ready or None, available_replicas=available or None,
                            observed_generation=rs.status.observed_generation if rs.status else None,
                            conditions=conditions or None)


def status_unchanged(rs: ReplicaSet, status: ReplicaSetStatus) -> bool:
    old = rs.status or ReplicaSetStatus()
    return ((old.replicas or 0, old.fully_labeled_replicas or 0, old.ready_replicas or 0,
             old.available_replicas or 0, old.conditions or None)
            == (status.replicas or 0, status.fully_labeled_replicas or 0, status.ready_replicas or 0,
                status.available_replicas or 0, status.conditions or None)
            and (rs.metadata.generation or 0) == (old.observed_generation or 0))


def pod_from_template(rs: ReplicaSet) -> dict[str, Any]:
    """controller.GetPodFromTemplate: labels, annotations, finalizers and spec from the template,
    generateName `<rs>-`, and the ReplicaSet as controller."""
    template = rs.spec.template if rs.spec else None
    meta = (template.metadata.to_dict() if template and template.metadata else {})
    metadata: dict[str, Any] = {"generateName": f"{rs.metadata.name}-", "namespace": rs.metadata.namespace,
                                "ownerReferences": [new_controller_ref(rs).to_dict()]}
    for key in ("labels", "annotations", "finalizers"):
        if meta.get(key):
            metadata[key] = meta[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": template.spec.to_dict() if template and template.spec else {}}


# --- the controller ----------------------------------------------------------------------------

class ReplicaSetController(QueueController):
    """`owners` is what it controls: the ReplicaSet informer, or a view of another kind's informer that
    shows ReplicaSets (the ReplicationController manager's, replicationcontroller.py); `rt` and `kind`
    name that kind in the writes and ownerReferences."""

    name = "replicaset-controller"
    rt = kinds.REPLICASETS
    kind = "ReplicaSet"

    def __init__(self, api: ApiClient, informers: SharedInformers, *, burst_replicas: int = BURST_REPLICAS,
                 owners: Any = None) -> None:
        self.api = api
        self.replicasets = owners if owners is not None else informers.replicasets
        self.informers = informers
        self.burst_replicas = burst_replicas
        self.queue = WorkQueue(self.name)
        self.expectations = Expectations()
        self.events = EventRecorder(api, self.name)
        self.replicasets.add_handler(self._on_replicaset)
        informers.pods.add_handler(self._on_pod)

    def initial_keys(self) -> Iterable[str]:
        return [rs.key for rs in self.replicasets.items()]

    # event handlers: they only enqueue, and lower expectations

    def _on_replicaset(self, event: str, old: ReplicaSet | None, new: ReplicaSet | None) -> None:
        rs = new or old
        assert rs is not None
        if new is None:
            self.expectations.forget(rs.key)
        self.queue.add(rs.key)

    def _owner_of(self, pod: Pod) -> ReplicaSet | None:
        ref = controller_ref(pod)
        if ref is None or ref.kind != self.kind:
            return None
        rs = self.replicasets.get(f"{pod.metadata.namespace}/{ref.name}")
        return rs if rs is not None and rs.metadata.uid == ref.uid else None

    def _matching(self, pod: Pod) -> list[ReplicaSet]:
        found = []
        for rs in self.replicasets.items():
            if rs.metadata.namespace != pod.metadata.namespace or not rs.spec:
                continue
            try:
                if selector_from_label_selector(rs.spec.selector).matches(pod.metadata.labels):
                    found.append(rs)
            except SelectorError:
                continue
        return found

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        if new is None:  # deleted
            assert old is not None
            rs = self._owner_of(old)
            if rs is not None:
                self.expectations.deletion_observed(rs.key, old.key)
                self.queue.add(rs.key)
            return
        rs = self._owner_of(new)
        if old is None:
            if rs is not None:
                if new.metadata.deletion_timestamp:
                    self.expectations.deletion_observed(rs.key, new.key)
                else:
                    self.expectations.creation_observed(rs.key)
                self.queue.add(rs.key)
            else:
                for match in self._matching(new):  # an orphan: who might adopt it?
                    self.queue.add(match.key)
            return
        if new.metadata.deletion_timestamp and not old.metadata.deletion_timestamp and rs is not None:
            # A graceful deletion starts: count it as deleted now (kube's updatePod -> deletePod).
            self.expectations.deletion_observed(rs.key, new.key)
        old_rs = self._owner_of(old)
        if old_rs is not None and (rs is None or old_rs.metadata.uid != rs.metadata.uid):
            self.queue.add(old_rs.key)
        if rs is not None:
            self.queue.add(rs.key)
        elif new.metadata.labels != old.metadata.labels or controller_ref(old) is not None:
            for match in self._matching(new):
                self.queue.add(match.key)

    # sync

    async def reconcile(self, key: str) -> None:
        rs = self.replicasets.get(key)
        if rs is None:
            self.expectations.forget(key)
            return
        namespace = rs.metadata.namespace or ""
        try:
            selector = selector_from_label_selector(rs.spec.selector if rs.spec else None)
        except SelectorError as exc:
            log.warning("replicaset %s: invalid selector: %s", key, exc)
            return
        needs_sync = self.expectations.satisfied(key)
        active = [p for p in self.informers.pods_in(namespace) if is_pod_active(p)]
        owned = await self._claim_pods(rs, selector, active)
        manage_error: str | None = None
        failure_reason = ""
        if needs_sync and not rs.metadata.deletion_timestamp:
            try:
                await self._manage_replicas(rs, owned)
            except ApiError as exc:
                manage_error = exc.message
                failure_reason = "FailedCreate" if len(owned) < ((rs.spec.replicas if rs.spec else None) or 0) \
                    else "FailedDelete"
        now = timeutil.now()
        status = calculate_status(rs, owned, manage_error, now, failure_reason=failure_reason)
        updated = await self._write_status(rs, status)
        min_ready = (rs.spec.min_ready_seconds if rs.spec else None) or 0
        want = (rs.spec.replicas if rs.spec else None) or 0
        status_now = updated.status if updated is not None else None
        if manage_error is None and min_ready > 0 and status_now is not None \
                and (status_now.ready_replicas or 0) == want and (status_now.available_replicas or 0) != want:
            # Pods become available by the clock, not by an event: look again once they may be.
            self.queue.add_after(key, min_ready + 1)
        if manage_error is not None:
            raise RuntimeError(manage_error)

    async def _claim_pods(self, rs: ReplicaSet, selector: Any, pods: list[Pod]) -> list[Pod]:
        return await claim_all(self.api, rs, self.rt, pods, kinds.PODS,
                               lambda pod: selector.matches(pod.metadata.labels), what="pods")

    async def _manage_replicas(self, rs: ReplicaSet, owned: list[Pod]) -> None:
        key = rs.key
        want = (rs.spec.replicas if rs.spec else None) or 0
        diff = len(owned) - want
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            template = rs.spec.template if rs.spec else None
            if not (template and template.metadata and template.metadata.labels):
                raise ApiError(0, "Invalid", "unable to create pods, no labels")
            self.expectations.expect_creations(key, count)
            log.info("replicaset %s: too few replicas, need %d, creating %d", key, want, count)
            created, error = await self._slow_start(count, lambda: self._create_pod(rs))
            for _ in range(count - created):
                # Failed or never attempted: the informer will not see these, so do not wait for them.
                self.expectations.creation_observed(key)
            if error is not None:
                raise error
        elif diff > 0:
            count = min(diff, self.burst_replicas)
            related = self._related_pods(rs)
            victims = pods_to_delete(owned, related, count, timeutil.now())
            self.expectations.expect_deletions(key, [p.key for p in victims])
            log.info("replicaset %s: too many replicas, need %d, deleting %d", key, want, count)
            results = await asyncio.gather(*(self._delete_pod(rs, p) for p in victims),
                                           return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                raise errors[0]

    @staticmethod
    async def _slow_start(count: int, create: Callable[[], Awaitable[None]]
                          ) -> tuple[int, BaseException | None]:
        """slowStartBatch: batches of 1, 2, 4, ... in parallel; a failing batch stops the rest. Returns the
        successes and the first error."""
        successes = 0
        for size in slow_start_batches(count):
            results = await asyncio.gather(*(create() for _ in range(size)), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            successes += size - len(errors)
            if errors:
                return successes, errors[0]
        return successes, None

    async def _create_pod(self, rs: ReplicaSet) -> None:
        try:
            pod = await self.api.create(kinds.PODS, pod_from_template(rs), rs.metadata.namespace)
        except ApiError as exc:
            if exc.code == 403 and "is being terminated" in exc.message:
                return  # the namespace is going away; every create would fail
            self.events.event(rs, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            raise
        self.events.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {pod.metadata.name}")

    async def _delete_pod(self, rs: ReplicaSet, pod: Pod) -> None:
        try:
            await self.api.delete(kinds.PODS, pod.metadata.name or "", pod.metadata.namespace)
        except NotFound:
            self.expectations.deletion_observed(rs.key, pod.key)
            return
        except ApiError as exc:
            self.expectations.deletion_observed(rs.key, pod.key)
            self.events.event(rs, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
            raise
        self.events.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod.metadata.name}")

    def _related_pods(self, rs: ReplicaSet) -> list[Pod]:
        """getIndirectlyRelatedPods: the pods of every ReplicaSet with the same controller as `rs`."""
        ref = controller_ref(rs)
        siblings = [rs]
        if ref is not None:
            siblings = [other for other in self.replicasets.items()
                        if other.metadata.namespace == rs.metadata.namespace
                        and (controller_ref(other) or OwnerReference()).uid == ref.uid]
        uids = {s.metadata.uid for s in siblings}
        return [p for p in self.informers.pods_in(rs.metadata.namespace or "")
                if (controller_ref(p) or OwnerReference()).uid in uids]

    async def _write_status(self, rs: ReplicaSet, status: ReplicaSetStatus) -> ReplicaSet | None:
        if status_unchanged(rs, status):
            return rs
        status.observed_generation = rs.metadata.generation
        for attempt in range(2):
            try:
                written = await self.api.update_status(self.rt, self.stored(rs.model_copy(update={"status": status})))
                return self.viewed(written)
            except NotFound:
                return None
            except Conflict:
                if attempt:
                    raise
                rs = self.viewed(await self.api.get(self.rt, rs.metadata.name or "", rs.metadata.namespace))
                status.observed_generation = rs.metadata.generation
        return None

    # The kind the controller writes, as the ReplicaSet it reasons about (identity for ReplicaSets).

    def stored(self, rs: ReplicaSet) -> Any:
        return rs

    def viewed(self, obj: Any) -> ReplicaSet:
        assert isinstance(obj, ReplicaSet)
        return obj
