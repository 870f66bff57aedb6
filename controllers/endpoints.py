"""The Endpoints controller: v1 Endpoints from a Service's selector and its ready pods."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass

from kubelab import kinds, wellknown
from kubelab.client import ApiClient, NotFound, WorkQueue
from kubelab.client.tracereport import TraceReporter
from kubelab.models import (
    EndpointAddress,
    EndpointPort,
    Endpoints,
    EndpointSubset,
    ObjectMeta,
    ObjectReference,
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
    CauseTracker,
    TriggerTimeTracker,
    format_time,
    report,
    trigger_revision,
    with_trigger_time,
)

log = logging.getLogger(__name__)

PortKey = tuple[str, int, str, str]  # EndpointPort: name, port, protocol, appProtocol

MAX_ADDRESSES = 1000
HEADLESS_LABEL = wellknown.HEADLESS
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"


def _address(pod: Pod, service: Service) -> EndpointAddress:
    address = EndpointAddress(ip=pod.pod_ip, node_name=endpoint_node_name(pod),
                              target_ref=ObjectReference(kind="Pod", namespace=pod.metadata.namespace,
                                                         name=pod.metadata.name, uid=pod.metadata.uid))
    hostname = endpoint_hostname(pod, service)
    if hostname:
        address.hostname = hostname
    return address


def _ip_key(address: EndpointAddress) -> tuple[bytes, str]:
    # LessEndpointAddress compares the IP *strings* as bytes, then the pod UID: 10.1.1.10 sorts before
    # 10.1.1.2, exactly as in a real cluster's Endpoints.
    return (address.ip or "").encode(), (address.target_ref.uid if address.target_ref else "") or ""


@dataclass(frozen=True)
class PodAddress:
    """What one pod adds to its Service's Endpoints: its address, whether it is ready, and the
    EndpointPorts it offers (the single pseudo-port None for a portless headless Service)."""

    ident: str
    address: EndpointAddress
    ready: bool
    ports: tuple[PortKey | None, ...]


def pod_address(pod: Pod, service: Service) -> PodAddress | None:
    """The pod's address in `service`'s Endpoints, or None when it has none. Pure."""
    if not should_include(pod, service, include_terminating=False):
        return None
    publish = bool(service.spec and service.spec.publish_not_ready_addresses)
    service_ports = (service.spec.ports if service.spec else None) or []
    address = _address(pod, service)
    ports: list[PortKey | None] = []
    for sp in service_ports:
        number = find_port(pod, sp)
        if number is not None:
            ports.append((sp.name or "", number, sp.protocol or "TCP", sp.app_protocol or ""))
    if not service_ports and is_headless(service):
        ports = [None]
    return PodAddress(f"{address.ip}/{address.target_ref.uid if address.target_ref else ''}", address,
                      publish or pod.is_ready(), tuple(ports))


def desired_subsets(service: Service, pods: list[Pod], *,
                    entries: Iterable[PodAddress | None] | None = None) -> list[EndpointSubset]:
    """RepackSubsets: collect, per port, the addresses offering it; ports offered by exactly the same
    addresses share one subset. An address both ready and not ready counts as not ready. `entries`:
    each pod's pod_address, when the caller has them already. Pure."""
    # EndpointPort (name, number, protocol, appProtocol) -> address ident -> (address, ready); a portless
    # headless Service uses the single pseudo-port None.
    offered: dict[PortKey | None, dict[str, tuple[EndpointAddress, bool]]] = {}
    for item in entries if entries is not None else (pod_address(pod, service) for pod in pods):
        if item is None:
            continue
        for port in item.ports:
            group = offered.setdefault(port, {})
            previous = group.get(item.ident)
            group[item.ident] = (item.address, item.ready and (previous[1] if previous else True))
    shared: dict[tuple[tuple[str, bool], ...], tuple[list[tuple[EndpointAddress, bool]], list[PortKey]]] = {}
    for port, group in offered.items():
        signature = tuple(sorted((ident, ready) for ident, (_, ready) in group.items()))
        entry = shared.setdefault(signature, (list(group.values()), []))
        if port is not None:
            entry[1].append(port)
    subsets = []
    for pairs, port_keys in shared.values():
        ready_addrs = sorted((a for a, r in pairs if r), key=_ip_key)
        not_ready = sorted((a for a, r in pairs if not r), key=_ip_key)
        subset = EndpointSubset(addresses=ready_addrs or None, not_ready_addresses=not_ready or None)
        if port_keys:
            subset.ports = [EndpointPort(name=name or None, port=number, protocol=proto, app_protocol=app or None)
                            for name, number, proto, app in sorted(port_keys)]
        subsets.append(subset)
    # kube orders subsets by a hash of their content; any stable order serves, this one reads well.
    subsets.sort(key=lambda s: [(p.name or "", p.port or 0) for p in s.ports or []])
    return subsets


def truncate(subsets: list[EndpointSubset]) -> bool:
    """truncateEndpoints: cut to MAX_ADDRESSES, keeping ready addresses first, each subset keeping its
    share rounded up. Worked example: ready 600 + 600 in two subsets -> ceil(600/1200 * 1000) = 500 from
    the first, min(500, 1000 - 500) = 500 from the second, and every not-ready address dropped."""
    total_ready = sum(len(s.addresses or []) for s in subsets)
    total_not_ready = sum(len(s.not_ready_addresses or []) for s in subsets)
    if total_ready + total_not_ready <= MAX_ADDRESSES:
        return False
    truncate_ready = total_ready > MAX_ADDRESSES
    limit, num_total = ((MAX_ADDRESSES, total_ready) if truncate_ready
                        else (MAX_ADDRESSES - total_ready, total_not_ready))
    can_be_added = limit
    for subset in subsets:
        members = (subset.addresses if truncate_ready else subset.not_ready_addresses) or []
        to_be_added = min(math.ceil(len(members) / num_total * limit), can_be_added)
        if truncate_ready:
            subset.addresses = members[:to_be_added] or None
            subset.not_ready_addresses = None
            can_be_added -= len(subset.addresses or [])
        else:
            subset.not_ready_addresses = members[:to_be_added] or None
            can_be_added -= len(subset.not_ready_addresses or [])
    return True


def desired_endpoints(service: Service, pods: list[Pod], *,
                      entries: Iterable[PodAddress | None] | None = None) -> Endpoints:
    """The Endpoints object: exactly the Service's labels, with the headless label set for a headless
    Service and removed otherwise (even if the Service itself carries it); the over-capacity annotation
    when more than 1000 addresses had to be cut. Pure."""
    labels = dict(service.metadata.labels or {})
    if is_headless(service):
        labels[HEADLESS_LABEL] = ""
    else:
        labels.pop(HEADLESS_LABEL, None)
    subsets = desired_subsets(service, pods, entries=entries)
    annotations = {OVER_CAPACITY: "truncated"} if truncate(subsets) else None
    return Endpoints(api_version="v1", kind="Endpoints",
                     metadata=ObjectMeta(name=service.metadata.name, namespace=service.metadata.namespace,
                                         labels=labels or None, annotations=annotations),
                     subsets=subsets or None)


def _comparable(ep: Endpoints) -> tuple[object, object, object]:
    subsets = [s.to_dict() for s in ep.subsets or []]
    labels = {k: v for k, v in (ep.metadata.labels or {}).items()}
    return subsets, labels, (ep.metadata.annotations or {}).get(OVER_CAPACITY)


class EndpointsController(QueueController):
    name = "endpoints-controller"

    def __init__(self, api: ApiClient, informers: SharedInformers, *, traces: TraceReporter | None = None) -> None:
        self.api = api
        self.informers = informers
        self.triggers = TriggerTimeTracker()
        self.traces = traces  # where each write's trace report goes (`kubelab trace`)
        self.causes = CauseTracker()  # which pod and Service changes each write reflects (kubelab trace)
        self.queue = WorkQueue(self.name)
        # Each pod's address by Service, kept for the pod's version, and each Endpoints' comparable form
        # as read back, kept for its resourceVersion: a sync's work per pod is a lookup unless it changed.
        self._addresses: PodMemo[PodAddress | None] = PodMemo()
        self._read_back = VersionedWire()
        informers.pods.add_handler(self._on_pod)  # before the queue's: a sync sees the deletion's cause
        informers.endpoints.add_handler(enqueue_services(informers, self.queue))

    def initial_keys(self) -> Iterable[str]:
        # Endpoints too: those of deleted Services are removed.
        return [*(svc.key for svc in self.informers.services.items()),
                *(ep.key for ep in self.informers.endpoints.items())]

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        if new is None and old is not None:
            self.causes.pod_deleted(old)

    async def reconcile(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        service = self.informers.services.get(key)
        current = self.informers.endpoints.get(key)
        if service is None:
            self.triggers.forget(key)
            self.causes.forget(key)
            self._addresses.forget(key)
            self._read_back.forget(key)
            if current is not None:
                try:
                    await self.api.delete(kinds.ENDPOINTS, name, namespace)
                except NotFound:
                    pass
            return
        if not selects_pods(service):
            return
        selector = selector_from_map(service.spec.selector if service.spec else None)
        pods = [p for p in self.informers.pods_in(namespace) if selector.matches(p.metadata.labels)]
        context = (service.metadata.uid, service.metadata.resource_version) if service.metadata.resource_version \
            else None
        entries = self._addresses.derive(key, context, pods, lambda pod: pod_address(pod, service))
        desired = desired_endpoints(service, pods, entries=entries)
        trigger = self.triggers.compute(service, pods)
        trigger_text = format_time(trigger) if trigger is not None else None
        causes, seen = self.causes.causes(service, pods, current=lambda k: self.informers.pods.get(
            k.removeprefix("/registry/pods/")))
        if current is None:
            desired.metadata.annotations = with_trigger_time(desired.metadata.annotations, trigger_text)
            log.info("endpoints: creating %s", key)
            written = await self.api.create(kinds.ENDPOINTS, desired, namespace)
            report(self.traces, self.name, key, "endpoints", written.metadata, trigger_revision(service, pods),
                   causes=causes)
            self.causes.commit(key, seen)
            return
        if self._read_back.get(key, current.metadata.resource_version, lambda: _comparable(current)) \
                == _comparable(desired):
            self.causes.commit(key, seen)
            return
        # A copy: the informer's object stays as the API server sent it (a write that fails must leave
        # the next sync comparing with what is stored, not with what it tried to write).
        annotations = {k: v for k, v in (current.metadata.annotations or {}).items() if k != OVER_CAPACITY}
        meta = current.metadata.model_copy(update={
            "labels": desired.metadata.labels,
            "annotations": with_trigger_time({**annotations, **(desired.metadata.annotations or {})}, trigger_text)})
        log.info("endpoints: updating %s", key)
        # Only the metadata of what was stored is read back: the model of 1,000 addresses cost more than the write.
        written = await self.api.update_metadata(kinds.ENDPOINTS, current.model_copy(update={
            "subsets": desired.subsets, "metadata": meta}))
        report(self.traces, self.name, key, "endpoints", written, trigger_revision(service, pods), causes=causes)
        self.causes.commit(key, seen)
