"""The EndpointSlice controller: discovery.k8s.io/v1 slices of at most 100 endpoints per Service port set.

Unlike Endpoints, slices keep terminating pods (serving/terminating conditions tell kube-proxy what to
do with them) and a pod whose named port does not resolve is still published, in a portless group.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubelab import kinds, wellknown
from kubelab.client import ApiClient, NotFound, WorkQueue
from kubelab.client.tracereport import TraceReporter
from kubelab.models import (
    Endpoint,
    EndpointConditions,
    EndpointSlice,
    EndpointSlicePort,
    Node,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    Pod,
    Service,
)
from kubelab.selectors import selector_from_map

from .informers import SharedInformers, enqueue_services
from .podmemo import PodMemo, VersionedWire
from .podutil import (
    endpoint_hostname,
    endpoint_node_name,
    find_port,
    is_headless,
    selects_pods,
    should_include,
)
from .queuecontroller import QueueController
from .triggertime import (
    Cause,
    CauseTracker,
    TriggerTimeTracker,
    format_time,
    report,
    trigger_revision,
    with_trigger_time,
)

log = logging.getLogger(__name__)

MAX_ENDPOINTS_PER_SLICE = 100
SERVICE_NAME_LABEL = wellknown.SERVICE_NAME
MANAGED_BY_LABEL = wellknown.ENDPOINTSLICE_MANAGED_BY
MANAGED_BY = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = wellknown.HEADLESS
ZONE_LABEL = "topology.kubernetes.io/zone"

PortKey = tuple[tuple[str, int, str, str], ...]  # per port: name, port, protocol, appProtocol ("" for none)


def slice_labels(service: Service) -> dict[str, str]:
    reserved = {SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL}
    labels = {k: v for k, v in (service.metadata.labels or {}).items() if k not in reserved}
    labels[SERVICE_NAME_LABEL] = service.metadata.name or ""
    labels[MANAGED_BY_LABEL] = MANAGED_BY
    if is_headless(service):
        labels[HEADLESS_LABEL] = ""
    return labels


def _zone(node: Node | None) -> str | None:
    return (node.metadata.labels or {}).get(ZONE_LABEL) if node else None


def _endpoint(pod: Pod, service: Service, nodes: dict[str, Node]) -> Endpoint:
    publish = bool(service.spec and service.spec.publish_not_ready_addresses)
    serving = pod.is_ready()
    terminating = pod.metadata.deletion_timestamp is not None
    endpoint = Endpoint(addresses=[str(ipaddress.ip_address(pod.pod_ip))],
                        conditions=EndpointConditions(ready=publish or (serving and not terminating),
                                                      serving=serving, terminating=terminating),
                        target_ref=ObjectReference(kind="Pod", namespace=pod.metadata.namespace,
                                                   name=pod.metadata.name, uid=pod.metadata.uid),
                        node_name=endpoint_node_name(pod))
    zone = _zone(nodes.get(pod.node_name))
    if zone:
        endpoint.zone = zone
    hostname = endpoint_hostname(pod, service)
    if hostname:
        endpoint.hostname = hostname
    return endpoint


@dataclass(frozen=True)
class PodEndpoint:
    """What one pod adds to its Service's slices: the ports it resolves, its endpoint and the endpoint's
    wire form (kept with it, so a sync compares slices without serialising every endpoint again)."""

    name: str
    ports: PortKey
    endpoint: Endpoint
    wire: dict[str, Any]


def pod_endpoint(pod: Pod, service: Service, nodes: dict[str, Node]) -> PodEndpoint | None:
    """The pod's endpoint in `service`'s slices, or None when it has none. Pure."""
    if not should_include(pod, service, include_terminating=True):
        return None
    if ipaddress.ip_address(pod.pod_ip).version != 4:
        return None
    resolved = []
    for sp in (service.spec.ports if service.spec else None) or []:
        number = find_port(pod, sp)
        if number is not None:
            resolved.append((sp.name or "", number, sp.protocol or "TCP", sp.app_protocol or ""))
    endpoint = _endpoint(pod, service, nodes)
    return PodEndpoint(pod.metadata.name or "", tuple(resolved), endpoint, endpoint.to_dict())


def _groups(entries: Iterable[PodEndpoint | None]) -> dict[PortKey, list[PodEndpoint]]:
    groups: dict[PortKey, list[PodEndpoint]] = {}
    for entry in entries:
        if entry is not None:
            groups.setdefault(entry.ports, []).append(entry)
    return {key: sorted(members, key=lambda m: m.name) for key, members in groups.items()}


def desired_groups(service: Service, pods: list[Pod], nodes: dict[str, Node]) -> dict[PortKey, list[Endpoint]]:
    """Endpoints grouped by the port list they resolve to, each group sorted by pod name. Pure."""
    groups = _groups(pod_endpoint(pod, service, nodes) for pod in pods)
    return {key: [m.endpoint for m in members] for key, members in groups.items()}


def planned_slices(service: Service, entries: Iterable[PodEndpoint | None]) -> list[tuple[EndpointSlice,
                                                                                         list[dict[str, Any]]]]:
    """desired_slices from each pod's PodEndpoint, each slice with its endpoints' wire forms. Pure."""
    labels = slice_labels(service)
    owner = OwnerReference(api_version="v1", kind="Service", name=service.metadata.name, uid=service.metadata.uid,
                           controller=True, block_owner_deletion=True)

    def make(ports: PortKey, endpoints: list[Endpoint]) -> EndpointSlice:
        return EndpointSlice(
            api_version="discovery.k8s.io/v1", kind="EndpointSlice",
            metadata=ObjectMeta(generate_name=f"{service.metadata.name}-", namespace=service.metadata.namespace,
                                labels=dict(labels), owner_references=[owner]),
            address_type="IPv4",
            endpoints=endpoints or None,
            # name is always set, so an unnamed Service port serialises as "name": "" (getEndpointPorts).
            ports=[EndpointSlicePort(name=name, port=port, protocol=proto, app_protocol=app or None)
                   for name, port, proto, app in ports] or None)

    slices = []
    for ports, members in sorted(_groups(entries).items()):
        for start in range(0, len(members), MAX_ENDPOINTS_PER_SLICE):
            chunk = members[start:start + MAX_ENDPOINTS_PER_SLICE]
            slices.append((make(ports, [m.endpoint for m in chunk]), [m.wire for m in chunk]))
    if not slices:
        slices.append((make((), []), []))
    return slices


def desired_slices(service: Service, pods: list[Pod], nodes: dict[str, Node]) -> list[EndpointSlice]:
    """The slices a Service should have: each port group cut into slices of at most 100 endpoints, or one
    empty placeholder slice when nothing backs the Service. Names are left to generateName. Pure."""
    return [s for s, _ in planned_slices(service, (pod_endpoint(pod, service, nodes) for pod in pods))]


def _port_key(slice_: EndpointSlice) -> PortKey:
    return tuple((p.name or "", p.port or 0, p.protocol or "TCP", p.app_protocol or "") for p in slice_.ports or [])


def _content(slice_: EndpointSlice) -> dict[str, Any]:
    data = slice_.to_dict()
    meta = data.get("metadata") or {}
    return {"endpoints": data.get("endpoints"), "ports": data.get("ports"), "labels": meta.get("labels"),
            "ownerReferences": meta.get("ownerReferences"), "addressType": data.get("addressType")}


def planned_content(slice_: EndpointSlice, wires: list[dict[str, Any]]) -> dict[str, Any]:
    """_content of a planned slice, its endpoints taken from their wire forms (equal to _content(slice_))."""
    content = _content(slice_.model_copy(update={"endpoints": None}))
    content["endpoints"] = wires or None
    return content


class EndpointSliceController(QueueController):
    name = "endpointslice-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers, *, traces: TraceReporter | None = None) -> None:
        self.api = api
        self.informers = informers
        self.triggers = TriggerTimeTracker()
        self.traces = traces  # where each write's trace report goes (`kubelab trace`)
        self.queue = WorkQueue(self.name)
        self.causes = CauseTracker()  # which pod and Service changes each write reflects (kubelab trace)
        informers.pods.add_handler(self._on_pod)
        # endpointSliceTracker: the resourceVersion of every slice this controller wrote, by service key,
        # so a sync never acts on an informer cache that has not seen those writes yet (it would create a
        # second slice for the same endpoints). The slice's own event enqueues the service again.
        self._written: dict[str, dict[str, int]] = {}
        # Each pod's endpoint by Service, kept for the pod's version, and each slice's content as read
        # back, kept for its resourceVersion: a sync's work per pod is a lookup unless the pod changed.
        self._endpoints: PodMemo[PodEndpoint | None] = PodMemo()
        self._contents = VersionedWire()
        informers.slices.add_handler(self._on_slice)
        informers.slices.add_handler(enqueue_services(informers, self.queue))

    def initial_keys(self) -> Iterable[str]:
        # Endpoints too, as the Endpoints controller queues them (a Service's key either way).
        return [*(svc.key for svc in self.informers.services.items()),
                *(ep.key for ep in self.informers.endpoints.items())]

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        if new is None and old is not None:
            self.causes.pod_deleted(old)

    def _on_slice(self, event: str, old: EndpointSlice | None, new: EndpointSlice | None) -> None:
        if new is None and old is not None:
            service = (old.metadata.labels or {}).get(SERVICE_NAME_LABEL)
            self._written.get(f"{old.metadata.namespace}/{service}", {}).pop(old.metadata.name or "", None)
            self._contents.forget(f"{old.metadata.namespace}/{old.metadata.name}")

    def _track(self, key: str, written: EndpointSlice) -> None:
        self._written.setdefault(key, {})[written.metadata.name or ""] = int(written.metadata.resource_version or 0)

    def _cache_is_stale(self, key: str, existing: list[EndpointSlice]) -> bool:
        written = self._written.get(key)
        if not written:
            return False
        seen = {s.metadata.name: int(s.metadata.resource_version or 0) for s in existing}
        return any(seen.get(name, 0) < rv for name, rv in written.items())

    def owned_slices(self, namespace: str, service_name: str) -> list[EndpointSlice]:
        return [s for s in self.informers.slices_in(namespace)
                if (s.metadata.labels or {}).get(SERVICE_NAME_LABEL) == service_name
                and (s.metadata.labels or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
                and not s.metadata.deletion_timestamp]

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        service = self.informers.services.get(key)
        if service is None:
            self.triggers.forget(key)
            self.causes.forget(key)
            self._written.pop(key, None)
            self._endpoints.forget(key)
            # The slices' ownerReference (controller, blockOwnerDeletion) hands them to the garbage
            # collector, as in kube: it deletes them once the Service's UID is gone, and holds a
            # Service deleted in the foreground until they are.
            return
        if not selects_pods(service):
            return
        if service.metadata.deletion_timestamp:
            return  # deleted in the foreground: no new slices while the garbage collector removes these
        # Listed only now, as kube's syncService returns for a selector-less Service before it lists any slice:
        # a scan of the namespace's slices per Service made a start-up with 10k such Services 10k x 10k.
        existing = self.owned_slices(namespace, name)
        for old in [s for s in existing if not any(o.uid == service.metadata.uid for o in s.metadata.owner_references or [])]:
            await self._delete(old)  # left over from an earlier Service of the same name
            existing.remove(old)
        if self._cache_is_stale(key, existing):
            log.debug("endpointslices: informer cache behind this controller's writes for %s; waiting", key)
            return
        selector = selector_from_map(service.spec.selector if service.spec else None)
        pods = [p for p in self.informers.pods_in(namespace) if selector.matches(p.metadata.labels)]
        nodes = self.informers.nodes.cache
        context = (service.metadata.uid, service.metadata.resource_version) if service.metadata.resource_version \
            else None
        entries = self._endpoints.derive(
            key, context, pods, lambda pod: pod_endpoint(pod, service, nodes),
            extra=lambda pod: _zone(nodes.get(pod.node_name)))
        desired = planned_slices(service, entries)
        trigger = self.triggers.compute(service, pods)
        trigger_text = format_time(trigger) if trigger is not None else None
        inputs = trigger_revision(service, pods)
        causes, seen = self.causes.causes(service, pods, current=lambda k: self.informers.pods.get(
            k.removeprefix("/registry/pods/")))
        # Reuse existing slices for the same port set in name order, so unchanged slices stay unchanged.
        pool: dict[PortKey, list[EndpointSlice]] = {}
        for s in sorted(existing, key=lambda s: s.metadata.name or ""):
            pool.setdefault(_port_key(s), []).append(s)
        to_create: list[tuple[EndpointSlice, list[dict[str, Any]]]] = []
        for want, wires in desired:
            candidates = pool.get(_port_key(want)) or []
            if candidates:
                await self._refresh(key, candidates.pop(0), want, wires, trigger_text, inputs, causes)
            else:
                to_create.append((want, wires))
        leftovers = [old for olds in pool.values() for old in olds]
        for want, wires in to_create:
            if leftovers:
                # kube's reconciler turns a create paired with a delete into an update of the slice that
                # would go: the placeholder written before any pod was ready becomes the real slice, and
                # its name stays (no second slice, no churn in every node's rules).
                await self._refresh(key, leftovers.pop(0), want, wires, trigger_text, inputs, causes)
                continue
            want.metadata.annotations = with_trigger_time(want.metadata.annotations, trigger_text)
            created = await self.api.create(kinds.ENDPOINTSLICES, want, namespace)
            self._track(key, created)
            log.info("endpointslices: created %s/%s for %s", namespace, created.metadata.name, key)
            report(self.traces, self.name, key, "endpointslices", created.metadata, inputs, causes=causes)
        for old in leftovers:
            await self._delete(old)
        self.causes.commit(key, seen)

    async def _refresh(self, key: str, have: EndpointSlice, want: EndpointSlice, wires: list[dict[str, Any]],
                       trigger_text: str | None, inputs: int, causes: list[Cause]) -> None:
        """Write `want`'s content into the existing slice `have`, if it differs."""
        current = self._contents.get(f"{have.metadata.namespace}/{have.metadata.name}",
                                     have.metadata.resource_version, lambda: _content(have))
        if current == planned_content(want, wires):
            return
        # A copy: the informer's object stays as the API server sent it (a write that fails must leave
        # the next sync comparing with what is stored, not with what it tried to write).
        meta = have.metadata.model_copy(update={
            "labels": want.metadata.labels, "owner_references": want.metadata.owner_references,
            "annotations": with_trigger_time(have.metadata.annotations, trigger_text)})
        update = have.model_copy(update={"endpoints": want.endpoints, "ports": want.ports, "metadata": meta})
        log.info("endpointslices: updating %s/%s", have.metadata.namespace, have.metadata.name)
        written = await self.api.update(kinds.ENDPOINTSLICES, update)
        self._track(key, written)
        report(self.traces, self.name, key, "endpointslices", written.metadata, inputs, causes=causes)

    async def _delete(self, slice_: EndpointSlice) -> None:
        try:
            await self.api.delete(kinds.ENDPOINTSLICES, slice_.metadata.name or "", slice_.metadata.namespace)
        except NotFound:
            pass
