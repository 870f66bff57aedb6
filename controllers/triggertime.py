"""The `endpoints.kubernetes.io/last-change-trigger-time` annotation (endpointslice's
TriggerTimeTracker, staging/src/k8s.io/endpointslice/util/trigger_time_tracker.go).

On a Service's first sync the trigger time is its creationTimestamp; afterwards, the earliest `Ready`
lastTransitionTime among its pods whose trigger time changed since the last sync; None when nothing
changed (the annotation is then removed). kube-proxy measures network programming latency from it
(kubeproxy_network_programming_duration_seconds). Each controller keeps its own tracker, as upstream.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from kubelab import kinds, timeutil
from kubelab.client.tracereport import TraceReporter
from kubelab.models import ObjectMeta, Pod, Service

ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time"


def pod_trigger_time(pod: Pod) -> datetime | None:
    """The pod's Ready condition's lastTransitionTime (None while it has none: getPodTriggerTime's zero)."""
    return _ready_state(pod)[1]


def _ready_state(pod: Pod) -> tuple[str | None, datetime | None]:
    for condition in (pod.status.conditions if pod.status else None) or []:
        if condition.type == "Ready" and condition.last_transition_time:
            return condition.status, timeutil.parse(condition.last_transition_time)
    return None, None


class TriggerTimeTracker:
    def __init__(self) -> None:
        # service key -> pod key -> (the pod read, Ready status, its lastTransitionTime). Upstream
        # compares the time alone; lastTransitionTime has whole seconds, and kubelab's kubelet stub turns a
        # pod Ready within the second it reported it not ready, so a change of the status counts too. The
        # pod object lets a sync skip reading (and parsing the time of) a pod the informer did not replace.
        self._services: dict[str, dict[str, tuple[Pod, str | None, datetime | None]]] = {}

    def compute(self, service: Service, pods: list[Pod]) -> datetime | None:
        """The trigger time of this sync of `service`, remembering the pods' times for the next."""
        key = f"{service.metadata.namespace}/{service.metadata.name}"
        known = self._services.get(key)
        before = known or {}
        current: dict[str, tuple[Pod, str | None, datetime | None]] = {}
        changed = []
        for pod in pods:
            pod_key = f"{pod.metadata.namespace}/{pod.metadata.name}"
            hit = before.get(pod_key)
            if hit is not None and hit[0] is pod:
                current[pod_key] = hit
                continue
            status, when = _ready_state(pod)
            current[pod_key] = (pod, status, when)
            if when is not None and (hit is None or hit[1:] != (status, when)):
                changed.append(when)
        self._services[key] = current
        if known is None:
            return timeutil.parse(service.metadata.creation_timestamp) if service.metadata.creation_timestamp \
                else None
        return min(changed) if changed else None

    def forget(self, key: str) -> None:
        self._services.pop(key, None)


# A write's causes: (storage key, resourceVersion) of the input changes it reflects (`kubelab trace`).
Cause = tuple[str, int]
# Per Service: input storage key -> (its resourceVersion, what an endpoint reads of it).
Inputs = dict[str, tuple[int, tuple[object, ...]]]

MAX_CAUSES = 1000  # per write report; a first sync of a Service with more pods names the first 1000
DELETED_REMEMBERED = 10_000  # deletion revisions kept for the syncs that have yet to see the pod gone


def pod_storage_key(pod: Pod) -> str:
    return kinds.PODS.storage_key(pod.metadata.namespace, pod.metadata.name or "")


def endpoint_fingerprint(pod: Pod) -> tuple[object, ...]:
    """What of a pod its endpoint reflects: podEndpointsChanged (pkg/controller/util/endpoint/
    controller_utils.go) compares readiness, the deletionTimestamp and the pod IPs, with hostname and
    subdomain among the membership fields; the node name and the container ports (named targetPorts)
    are read too. A change to anything else (a label that keeps the pod selected, an annotation) moves
    no endpoint and causes no write."""
    status, spec = pod.status, pod.spec
    ready = _ready_state(pod)[0]
    ips = tuple(ip.ip for ip in (status.pod_ips if status and status.pod_ips else []))
    ports = tuple((c.name, tuple((p.name, p.container_port, p.protocol) for p in c.ports or []))
                  for c in (spec.containers if spec else None) or [])
    return (ready, pod.metadata.deletion_timestamp is not None, status.pod_ip if status else None, ips,
            spec.node_name if spec else None, spec.hostname if spec else None, spec.subdomain if spec else None,
            status.phase if status else None, ports)


def service_fingerprint(service: Service) -> tuple[object, ...]:
    """What of a Service its Endpoints and EndpointSlices reflect: its labels (both copy them) and its
    spec (selector, ports, headlessness, publishNotReadyAddresses...). An annotation is not read."""
    return (tuple(sorted((service.metadata.labels or {}).items())),
            service.spec.model_dump_json() if service.spec else None)


class CauseTracker:
    """Which input changes a sync's write reflects, by construction (`kubelab trace`): each sync
    compares the Service and the pods it selects with what the last committed sync of that Service
    read. A pod that came, went (deleted, or relabelled out of the selector) or changed what its
    endpoint shows is a cause, at the revision of that change; the Service is one when what its
    endpoints read of it changed. A sync that writes nothing commits its inputs all the same: a
    change that moved no endpoint is nobody's cause later. A sync that fails commits nothing, so its
    retry names the same causes."""

    def __init__(self) -> None:
        self._seen: dict[str, Inputs] = {}
        # Per Service: pod storage key -> (the pod object last read, its endpoint_fingerprint), so a sync
        # fingerprints only the pods the informer replaced since.
        self._fingerprints: dict[str, dict[str, tuple[Pod, tuple[object, ...]]]] = {}
        # pod storage key -> the revision of its deletion (the DELETED watch event's resourceVersion)
        self._deleted: OrderedDict[str, int] = OrderedDict()

    def pod_deleted(self, pod: Pod) -> None:
        key = pod_storage_key(pod)
        self._deleted[key] = int(pod.metadata.resource_version or 0)
        self._deleted.move_to_end(key)
        while len(self._deleted) > DELETED_REMEMBERED:
            self._deleted.popitem(last=False)

    def causes(self, service: Service, pods: list[Pod], *,
               current: Callable[[str], Pod | None]) -> tuple[list[Cause], Inputs]:
        """The causes of this sync of `service` and the inputs to commit once its writes are done.
        `current(pod storage key)` is the pod as the informer has it now (None once deleted)."""
        key = f"{service.metadata.namespace}/{service.metadata.name}"
        service_key = f"/registry/services/{key}"
        inputs: Inputs = {service_key: (int(service.metadata.resource_version or 0), service_fingerprint(service))}
        known = self._fingerprints.get(key, {})
        fingerprints: dict[str, tuple[Pod, tuple[object, ...]]] = {}
        for pod in pods:
            storage_key = pod_storage_key(pod)
            hit = known.get(storage_key)
            shown = hit[1] if hit is not None and hit[0] is pod else endpoint_fingerprint(pod)
            fingerprints[storage_key] = (pod, shown)
            inputs[storage_key] = (int(pod.metadata.resource_version or 0), shown)
        self._fingerprints[key] = fingerprints
        before = self._seen.get(key)
        if before is None:
            found = [(k, rv) for k, (rv, _) in inputs.items()]
        else:
            found = [(k, rv) for k, (rv, shown) in inputs.items() if k not in before or before[k][1] != shown]
            for gone in before.keys() - inputs.keys():
                now = current(gone)
                revision = int(now.metadata.resource_version or 0) if now is not None else self._deleted.get(gone)
                if revision is not None:
                    found.append((gone, revision))
        return found[:MAX_CAUSES], inputs

    def commit(self, service_key: str, inputs: Inputs) -> None:
        self._seen[service_key] = inputs

    def forget(self, service_key: str) -> None:
        self._seen.pop(service_key, None)
        self._fingerprints.pop(service_key, None)


def trigger_revision(service: Service, pods: list[Pod]) -> int:
    """The newest resourceVersion among a sync's inputs: what the write it leads to reflects (for
    `kubelab trace`)."""
    return max((int(o.metadata.resource_version or 0) for o in (service, *pods)), default=0)


def report(reporter: TraceReporter | None, controller: str, service_key: str, resource: str,
           meta: ObjectMeta, trigger: int, *, causes: list[Cause]) -> None:
    """Tell the API server's trace ring that the object of metadata `meta` (an Endpoints or EndpointSlice,
    as written) was written, and which input changes (CauseTracker) it reflects."""
    if reporter is None:
        return
    reporter.report({"type": "endpoints", "controller": controller, "service": service_key,
                     "object": f"/registry/{resource}/{meta.namespace}/{meta.name}",
                     "revision": int(meta.resource_version or 0), "triggerRevision": trigger, "at": time.time(),
                     "causes": [[k, rv] for k, rv in causes]})


def with_trigger_time(annotations: dict[str, str] | None, when: str | None) -> dict[str, str] | None:
    """`annotations` with the trigger time set to `when`, or removed when None (nothing changed)."""
    result = {k: v for k, v in (annotations or {}).items() if k != ANNOTATION}
    if when is not None:
        result[ANNOTATION] = when
    return result or None


def format_time(when: datetime) -> str:
    """RFC3339Nano in UTC, as Go's time.RFC3339Nano writes it."""
    when = when.astimezone(UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += f".{when.microsecond:06d}".rstrip("0")
    return text + "Z"
