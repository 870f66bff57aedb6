"""The StatefulSet controller: pods with stable ordinal identities (kube's pkg/controller/statefulset).

Pod `<set>-<i>` for each ordinal i in [start, start+replicas), with hostname `<set>-<i>` and subdomain
serviceName, so the headless Service's EndpointSlices carry the hostname and cluster DNS answers
`<set>-<i>.<service>.<ns>.svc.<zone>`; labelled `statefulset.kubernetes.io/pod-name`,
`apps.kubernetes.io/pod-index` and `controller-revision-hash`. The template history is kept in
ControllerRevisions, as for DaemonSets.

`plan` is the pure decision of one sync, in kube's order: replace finished pods and create missing ones
(lowest ordinal first), then delete condemned ones (ordinals past the end, highest first), then —
RollingUpdate — delete the highest-ordinal pod at or above the partition that is not at the update
revision, one at a time, waiting for each to come back healthy. OrderedReady waits for every pod before
it to be Running and Ready before creating the next, and for each deletion to finish before the next;
Parallel creates and deletes without waiting (the rolling update is one at a time in both).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubelab import kinds, timeutil, validation
from kubelab.client import AlreadyExists, ApiClient, ApiError, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import ControllerRevision, Pod, PodTemplateSpec, StatefulSet, StatefulSetStatus
from kubelab.selectors import SelectorError, selector_from_label_selector

from . import history
from .informers import SharedInformers
from .ownership import claim_all, controller_ref, new_controller_ref
from .queuecontroller import QueueController
from .replicaset import is_pod_available
from .statuswrite import write_status

log = logging.getLogger(__name__)

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


# --- pure: identities and the next step ----------------------------------------------------------

def start_ordinal(sts: StatefulSet) -> int:
    ordinals = sts.spec.ordinals if sts.spec else None
    return (ordinals.start if ordinals else None) or 0


def ordinal_of(sts: StatefulSet, pod: Pod) -> int | None:
    """getParentNameAndOrdinal: the ordinal of `<set>-<i>`, None for a pod not named that way."""
    prefix = f"{sts.metadata.name}-"
    name = pod.metadata.name or ""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix):]
    # ASCII digits only (str.isdigit takes "٣"), and no leading zero: web-01 is no ordinal of web.
    if not validation.is_ascii_digits(digits) or (digits != "0" and digits.startswith("0")):
        return None
    return int(digits)


def revision_of(pod: Pod) -> str:
    return (pod.metadata.labels or {}).get(history.HASH_LABEL, "")


def is_terminating(pod: Pod) -> bool:
    return bool(pod.metadata.deletion_timestamp)


def is_running_and_ready(pod: Pod) -> bool:
    return pod.phase == "Running" and pod.is_ready()


def is_healthy(pod: Pod, min_ready_seconds: int, now: datetime) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod) and is_pod_available(pod, min_ready_seconds, now)


@dataclass(frozen=True)
class Action:
    kind: str  # "create" | "delete"
    ordinal: int
    revision: str = ""  # for a create: the revision hash the pod is made from
    pod_name: str = ""  # for a delete


def partition_of(sts: StatefulSet) -> int | None:
    strategy = sts.spec.update_strategy if sts.spec else None
    if strategy is None or strategy.type != "RollingUpdate":
        return None
    ru = strategy.rolling_update
    return (ru.partition if ru else None) or 0


def plan(sts: StatefulSet, pods: list[Pod], *, current_revision: str, update_revision: str,
         current_replicas: int, now: datetime) -> list[Action]:
    """What one sync does (kube's updateStatefulSet / processReplica / processCondemned / the rolling update).
    `pods` are the set's pods; `current_replicas` is status.currentReplicas (which ordinals new pods take the
    current revision for, when there is no partition)."""
    spec = sts.spec
    replicas = (spec.replicas if spec else None) or 0
    start = start_ordinal(sts)
    ordered = (spec.pod_management_policy if spec else None) != "Parallel"
    min_ready = (spec.min_ready_seconds if spec else None) or 0
    by_ordinal: dict[int, Pod] = {}
    condemned: list[tuple[int, Pod]] = []
    for pod in pods:
        ordinal = ordinal_of(sts, pod)
        if ordinal is None:
            continue
        if start <= ordinal < start + replicas:
            by_ordinal[ordinal] = pod
        else:
            condemned.append((ordinal, pod))
    partition = partition_of(sts)
    rolling = spec is not None and spec.update_strategy is not None and spec.update_strategy.type == "RollingUpdate"
    bound = start + (partition if partition is not None else current_replicas)

    def revision_for(ordinal: int) -> str:
        # newVersionedStatefulSetPod: below the partition, the current revision's template.
        return current_revision if rolling and ordinal < bound else update_revision

    actions: list[Action] = []
    for ordinal in range(start, start + replicas):
        found = by_ordinal.get(ordinal)
        if found is None:
            actions.append(Action("create", ordinal, revision=revision_for(ordinal)))
            if ordered:
                return actions
            continue
        pod = found
        if pod.phase in ("Failed", "Succeeded") and not is_terminating(pod):
            actions.append(Action("delete", ordinal, pod_name=pod.metadata.name or ""))
            if ordered:
                return actions
            continue
        if ordered and (is_terminating(pod) or not is_running_and_ready(pod)):
            return actions  # wait for it before going on
    for ordinal, pod in sorted(condemned, key=lambda item: item[0], reverse=True):
        if is_terminating(pod):
            if ordered:
                return actions
            continue
        if ordered and actions:
            return actions
        actions.append(Action("delete", ordinal, pod_name=pod.metadata.name or ""))
        if ordered:
            return actions
    if actions or not rolling:
        return actions
    for ordinal in range(start + replicas - 1, start + (partition or 0) - 1, -1):
        target = by_ordinal.get(ordinal)
        if target is None:
            return actions
        pod = target
        if revision_of(pod) != update_revision and not is_terminating(pod):
            return [Action("delete", ordinal, pod_name=pod.metadata.name or "")]
        if not is_healthy(pod, min_ready, now):
            return actions
    return actions


def calculate_status(sts: StatefulSet, pods: list[Pod], *, current_revision: str, update_revision: str,
                     now: datetime) -> StatefulSetStatus:
    """Counts over the set's live pods; once every pod is updated and ready, the update revision becomes
    the current one (completeRollingUpdate)."""
    min_ready = (sts.spec.min_ready_seconds if sts.spec else None) or 0
    live = [p for p in pods if not is_terminating(p) and ordinal_of(sts, p) is not None]
    ready = sum(1 for p in live if is_running_and_ready(p))
    available = sum(1 for p in live if is_running_and_ready(p) and is_pod_available(p, min_ready, now))
    current = sum(1 for p in live if revision_of(p) == current_revision)
    updated = sum(1 for p in live if revision_of(p) == update_revision)
    old = sts.status or StatefulSetStatus()
    status = StatefulSetStatus(observed_generation=sts.metadata.generation, replicas=len(live), ready_replicas=ready,
                               current_replicas=current, updated_replicas=updated, available_replicas=available,
                               current_revision=current_revision, update_revision=update_revision,
                               collision_count=old.collision_count or 0, conditions=old.conditions)
    strategy = sts.spec.update_strategy if sts.spec else None
    if strategy is not None and strategy.type == "RollingUpdate" and updated == len(live) == ready:
        status.current_replicas = updated
        status.current_revision = update_revision
    return status


def template_of(revision: ControllerRevision | None) -> PodTemplateSpec | None:
    """The template a revision restores (its patch, without the `$patch` directive)."""
    data = ((revision.data or {}).get("spec") or {}).get("template") if revision is not None else None
    if not isinstance(data, dict):
        return None
    return PodTemplateSpec.model_validate({k: v for k, v in data.items() if k != "$patch"})


def new_pod(sts: StatefulSet, ordinal: int, template: PodTemplateSpec | None, revision: str) -> dict[str, Any]:
    """newStatefulSetPod: the template with the pod's identity (name, hostname, subdomain, labels)."""
    name = f"{sts.metadata.name}-{ordinal}"
    meta = template.metadata.to_dict() if template and template.metadata else {}
    spec = template.spec.to_dict() if template and template.spec else {}
    spec["hostname"] = name
    service = sts.spec.service_name if sts.spec else None
    if service:
        spec["subdomain"] = service
    labels = {**(meta.get("labels") or {}), POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal),
              history.HASH_LABEL: revision}
    metadata: dict[str, Any] = {"name": name, "namespace": sts.metadata.namespace, "labels": labels,
                                "ownerReferences": [new_controller_ref(sts).to_dict()]}
    for key in ("annotations", "finalizers"):
        if meta.get(key):
            metadata[key] = meta[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# --- the controller ----------------------------------------------------------------------------

class StatefulSetController(QueueController):
    name = "statefulset-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers) -> None:
        self.api = api
        self.informers = informers
        self.statefulsets = informers.statefulsets
        self.queue = WorkQueue(self.name)
        self.events = EventRecorder(api, self.name)
        self.statefulsets.add_handler(lambda e, old, new: self.queue.add((new or old).key))
        informers.pods.add_handler(self._on_pod)

    def initial_keys(self) -> Iterable[str]:
        return [sts.key for sts in self.statefulsets.items()]

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        for pod in (old, new):
            ref = controller_ref(pod) if pod is not None else None
            if pod is not None and ref is not None and ref.kind == "StatefulSet":
                self.queue.add(f"{pod.metadata.namespace}/{ref.name}")
        if new is not None and controller_ref(new) is None:
            for sts in self.statefulsets.items():
                if sts.metadata.namespace != new.metadata.namespace or not sts.spec:
                    continue
                try:
                    if selector_from_label_selector(sts.spec.selector).matches(new.metadata.labels):
                        self.queue.add(sts.key)
                except SelectorError:
                    continue

    async def reconcile(self, key: str) -> None:
        cached = self.statefulsets.get(key)
        if cached is None:
            return
        sts = cached.model_copy(deep=True)
        try:
            selector = selector_from_label_selector(sts.spec.selector if sts.spec else None)
        except SelectorError as exc:
            log.warning("statefulset %s: invalid selector: %s", key, exc)
            return
        candidates = self.informers.pods_in(sts.metadata.namespace or "")
        # A pod is the set's only if it is named as one of its ordinals (isMemberOf), besides matching.
        pods = await claim_all(self.api, sts, kinds.STATEFULSETS, candidates, kinds.PODS,
                               lambda pod: selector.matches(pod.metadata.labels) and ordinal_of(sts, pod) is not None,
                               what="pods")
        if sts.metadata.deletion_timestamp:
            return
        revisions = await history.claim_revisions(self.api, sts, kinds.STATEFULSETS,
                                                  self.informers.controllerrevisions.items(), selector)
        status = sts.status or StatefulSetStatus()
        try:
            # Always a count, 0 before the first status (kube's getStatefulSetRevisions): hashing without one
            # named the first sync's revision differently from the next one's, and a sync whose cache had
            # not yet seen the first revision made a second of the same template.
            update, revisions = await history.sync_revisions(self.api, sts, sts.spec.template if sts.spec else None,
                                                             revisions, collision_count=status.collision_count or 0)
        except history.HashCollision:
            bumped = status.model_copy(update={"collision_count": (status.collision_count or 0) + 1})
            await self.api.update_status(kinds.STATEFULSETS, sts.model_copy(update={"status": bumped}))
            raise
        # A StatefulSet names revisions by their ControllerRevision's name, in its status and in its pods'
        # controller-revision-hash label (`web-7b9d4c5f8d`), where a DaemonSet's pods carry the bare hash.
        update_hash = update.metadata.name or ""
        by_hash = {r.metadata.name or "": r for r in revisions}
        current_hash = status.current_revision if status.current_revision in by_hash else update_hash
        now = timeutil.now()
        actions = plan(sts, pods, current_revision=current_hash or "", update_revision=update_hash,
                       current_replicas=status.current_replicas or 0, now=now)
        templates = {h: template_of(r) for h, r in by_hash.items()}
        results = await asyncio.gather(*(self._act(sts, a, templates.get(a.revision)) for a in actions),
                                       return_exceptions=True)
        live = {revision_of(p) for p in pods} | {current_hash or ""}
        limit = sts.spec.revision_history_limit if sts.spec and sts.spec.revision_history_limit is not None else 10
        stale = history.to_truncate(revisions, limit=limit + 1, live_hashes=set(),
                                    keep=live | {update.metadata.name or ""})
        await history.delete_revisions(self.api, stale)
        status = calculate_status(sts, pods, current_revision=current_hash or "", update_revision=update_hash,
                                  now=now)
        await write_status(self.api, kinds.STATEFULSETS, sts, status)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _act(self, sts: StatefulSet, action: Action, template: PodTemplateSpec | None) -> None:
        if action.kind == "create":
            body = new_pod(sts, action.ordinal, template or (sts.spec.template if sts.spec else None),
                           action.revision)
            try:
                await self.api.create(kinds.PODS, body, sts.metadata.namespace)
            except AlreadyExists:
                return  # the informer had not seen it yet
            except ApiError as exc:
                self.events.event(sts, "Warning", "FailedCreate",
                                  f"create Pod {body['metadata']['name']} in StatefulSet {sts.metadata.name} "
                                  f"failed error: {exc.message}")
                raise
            self.events.event(sts, "Normal", "SuccessfulCreate",
                              f"create Pod {body['metadata']['name']} in StatefulSet {sts.metadata.name} successful")
            return
        try:
            await self.api.delete(kinds.PODS, action.pod_name, sts.metadata.namespace)
        except NotFound:
            return
        except ApiError as exc:
            self.events.event(sts, "Warning", "FailedDelete",
                              f"delete Pod {action.pod_name} in StatefulSet {sts.metadata.name} failed error: "
                              f"{exc.message}")
            raise
        self.events.event(sts, "Normal", "SuccessfulDelete",
                          f"delete Pod {action.pod_name} in StatefulSet {sts.metadata.name} successful")
