"""The `endpoints.kubernetes.io/last-change-trigger-time` annotation (endpointslice's
TriggerTimeTracker, staging/src/k8s.io/endpointslice/util/trigger_time_tracker.go).

On a Service's first sync the trigger time is its creationTimestamp; afterwards, the earliest `Ready`
lastTransitionTime among its pods whose trigger time changed since the last sync; None when nothing
changed (the annotation is then removed). kube-proxy measures network programming latency from it
(kubeproxy_network_programming_duration_seconds). Each controller keeps its own tracker, as upstream.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from kubelab import timeutil
from kubelab.client.tracereport import TraceReporter
from kubelab.models import Pod, Service, TypedObject

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
        # service key -> pod key -> (Ready status, its lastTransitionTime). Upstream compares the time
        # alone; lastTransitionTime has whole seconds, and kubelab's kubelet stub turns a pod Ready within
        # the second it reported it not ready, so a change of the status counts too.
        self._services: dict[str, dict[str, tuple[str | None, datetime | None]]] = {}

    def compute(self, service: Service, pods: list[Pod]) -> datetime | None:
        """The trigger time of this sync of `service`, remembering the pods' times for the next."""
        key = f"{service.metadata.namespace}/{service.metadata.name}"
        known = self._services.get(key)
        current = {f"{p.metadata.namespace}/{p.metadata.name}": _ready_state(p) for p in pods}
        self._services[key] = current
        if known is None:
            return timeutil.parse(service.metadata.creation_timestamp) if service.metadata.creation_timestamp \
                else None
        changed = [state[1] for k, state in current.items() if state[1] is not None and known.get(k) != state]
        return min(changed) if changed else None

    def forget(self, key: str) -> None:
        self._services.pop(key, None)


def trigger_revision(service: Service, pods: list[Pod]) -> int:
    """The newest resourceVersion among a sync's inputs: what the write it leads to reflects (for
    `kubelab trace`)."""
    return max((int(o.metadata.resource_version or 0) for o in (service, *pods)), default=0)


def report(reporter: TraceReporter | None, controller: str, service_key: str, resource: str,
           written: TypedObject, trigger: int) -> None:
    """Tell the API server's trace ring that `written` (an Endpoints or EndpointSlice) was written."""
    if reporter is None:
        return
    meta = written.metadata
    reporter.report({"type": "endpoints", "controller": controller, "service": service_key,
                     "object": f"/registry/{resource}/{meta.namespace}/{meta.name}",
                     "revision": int(meta.resource_version or 0), "triggerRevision": trigger, "at": time.time()})


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
