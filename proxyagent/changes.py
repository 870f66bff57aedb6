"""What kube-proxy knows between syncs: its service-port and endpoint maps, and what changed.

kube-proxy's ServiceChangeTracker and EndpointsChangeTracker (pkg/proxy/servicechangetracker.go,
endpointschangetracker.go, endpointslicecache.go) turn every informer event into kube-proxy's own
view of the object at once, and remember which Services differ from what the last sync applied. A
Service updated and then changed back, or an EndpointSlice update that touches nothing kube-proxy
reads (a label, an annotation), is no change at all and wakes no sync.

`ProxyState` does the same, and keeps the model `render_ports` consumes up to date incrementally:
an event costs work proportional to that one Service and its slices, not to the cluster. The
per-Service objects stay the same Python objects while nothing changes, which is what lets the
render's fragment cache recognise them at the cost of an identity check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubelab import timeutil
from kubelab.models import EndpointSlice, Service

from .serviceports import (
    LABEL_SERVICE_NAME,
    EndpointInfo,
    EndpointsKey,
    IPFamily,
    ServicePortInfo,
    SliceEndpoints,
    merge_endpoints,
    service_ports,
    slice_endpoints,
)

# Set by the endpoints and EndpointSlice controllers to when the change that made them write
# happened (a pod turning ready, a Service's selector changing); network programming latency is
# measured from it to the end of the sync that applied it.
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"

ServiceEndpoints = dict[EndpointsKey, tuple[EndpointInfo, ...]]


@dataclass(frozen=True)
class Changes:
    """What a sync checks out: the Services whose rules must be rewritten, and for latency, when
    the endpoint changes it applies were triggered (wall-clock seconds)."""

    services: frozenset[str] = frozenset()  # "namespace/name" with Service changes
    endpoints: frozenset[str] = frozenset()  # "namespace/name" with endpoint changes
    trigger_times: tuple[float, ...] = ()

    @property
    def all(self) -> frozenset[str]:
        return self.services | self.endpoints


@dataclass
class _SliceEntry:
    service: str  # "namespace/service-name"
    name: str
    contribution: SliceEndpoints


@dataclass
class _ServiceEndpoints:
    slices: dict[str, _SliceEntry] = field(default_factory=dict)  # by slice key
    merged: ServiceEndpoints = field(default_factory=dict)


class ProxyState:
    """kube-proxy's service-port map and endpoints map, fed by informer events."""

    def __init__(self, *, node_name: str, family: IPFamily = "IPv4",
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.node_name = node_name
        self.family = family
        self._wall = wall_clock
        # Trigger times from before this tracker started belong to changes that an earlier
        # incarnation (or nobody) applied; kube-proxy ignores them (trackerStartTime).
        self._started = wall_clock()
        self._ports: dict[str, tuple[ServicePortInfo, ...]] = {}
        self._applied_ports: dict[str, tuple[ServicePortInfo, ...]] = {}
        self._by_service: dict[str, _ServiceEndpoints] = {}
        self._slice_service: dict[str, str] = {}  # slice key -> service key
        self._applied_endpoints: dict[str, ServiceEndpoints] = {}
        self._endpoints_map: dict[EndpointsKey, tuple[EndpointInfo, ...]] = {}
        self._pending_services: set[str] = set()
        self._pending_endpoints: set[str] = set()
        self._trigger_times: dict[str, list[float]] = {}
        self._sorted_ports: list[ServicePortInfo] | None = []
        self._endpoints_total = 0
        self._service_endpoint_counts: dict[str, int] = {}  # its share of _endpoints_total
        self.service_events = 0  # sync_proxy_rules_service_changes_total
        self.endpoint_events = 0  # sync_proxy_rules_endpoint_changes_total
        # The Services whose view the latest event changed (`kubelab trace`: the proxier's causes).
        self.last_changed: frozenset[str] = frozenset()

    # --- events --------------------------------------------------------------------------------

    def update_service(self, old: Service | None, new: Service | None) -> bool:
        """A Service was added (old None), updated or deleted (new None). True if some change
        is now pending, i.e. a sync is worth requesting (ServiceChangeTracker.Update)."""
        obj = new or old
        self.last_changed = frozenset()
        if obj is None:
            return self.has_pending()
        self.service_events += 1
        key = obj.key
        ports = service_ports(new, self.family) if new is not None else ()
        self.last_changed = frozenset({key}) if ports != self._ports.get(key, ()) else frozenset()
        if ports != self._ports.get(key, ()):
            if ports:
                self._ports[key] = ports
            else:
                self._ports.pop(key, None)
            self._sorted_ports = None
            self._recount(key)
        if self._ports.get(key, ()) != self._applied_ports.get(key, ()):
            self._pending_services.add(key)
        else:
            self._pending_services.discard(key)
        return self.has_pending()

    def update_slice(self, old: EndpointSlice | None, new: EndpointSlice | None) -> bool:
        """An EndpointSlice was added, updated or deleted (EndpointsChangeTracker.EndpointSliceUpdate)."""
        obj = new or old
        self.last_changed = frozenset()
        if obj is None or (obj.address_type is not None and obj.address_type != self.family):
            return self.has_pending()
        self.endpoint_events += 1
        slice_key = obj.key
        previous_service = self._slice_service.pop(slice_key, None)
        if previous_service is not None:
            self._by_service[previous_service].slices.pop(slice_key, None)
        service = None
        if new is not None and new.labels.get(LABEL_SERVICE_NAME):
            service = f"{new.namespace}/{new.labels[LABEL_SERVICE_NAME]}"
            entry = _SliceEntry(service, new.name or "",
                                slice_endpoints(new, node_name=self.node_name, family=self.family))
            self._by_service.setdefault(service, _ServiceEndpoints()).slices[slice_key] = entry
            self._slice_service[slice_key] = service
        changed = set()
        for affected in {s for s in (previous_service, service) if s is not None}:
            remerged = self._remerge(affected)
            if remerged:
                changed.add(affected)
            if remerged and new is not None and affected == service:
                when = timeutil.parse((new.metadata.annotations or {}).get(LAST_CHANGE_TRIGGER_TIME))
                if when is not None and when.timestamp() > self._started:
                    self._trigger_times.setdefault(affected, []).append(when.timestamp())
            elif new is None:
                # A deleted slice's trigger time is its last update's, not the deletion's.
                self._trigger_times.pop(affected, None)
        self.last_changed = frozenset(changed)
        return self.has_pending()

    def _remerge(self, service: str) -> bool:
        """Recompute one Service's endpoints; True if they differ from what it had before."""
        entry = self._by_service.get(service)
        slices = sorted(entry.slices.values(), key=lambda e: e.name) if entry else []
        merged = merge_endpoints(e.contribution for e in slices)
        before = entry.merged if entry else {}
        if entry is not None:
            if slices:
                entry.merged = merged
            else:
                del self._by_service[service]
        if merged == before:
            return False
        for key in before:
            self._endpoints_map.pop(key, None)
        self._endpoints_map.update(merged)
        self._recount(service)
        if merged != self._applied_endpoints.get(service, {}):
            self._pending_endpoints.add(service)
        else:
            self._pending_endpoints.discard(service)
        return True

    # --- for the sync --------------------------------------------------------------------------

    def is_pending(self, service: str) -> bool:
        return service in self._pending_services or service in self._pending_endpoints

    def has_pending(self) -> bool:
        return bool(self._pending_services or self._pending_endpoints)

    @property
    def pending_services(self) -> int:
        return len(self._pending_services)

    @property
    def pending_endpoints(self) -> int:
        return len(self._pending_endpoints)

    def checkout(self) -> Changes:
        """Take the pending changes: from now on they count as applied (svcPortMap.Update and
        endpointsMap.Update at the start of syncProxyRules). If the sync then fails, kube-proxy
        falls back to a full sync, which needs no change list."""
        changes = Changes(services=frozenset(self._pending_services),
                          endpoints=frozenset(self._pending_endpoints),
                          trigger_times=tuple(t for s in sorted(self._trigger_times) for t in self._trigger_times[s]))
        for key in self._pending_services:
            ports = self._ports.get(key)
            if ports:
                self._applied_ports[key] = ports
            else:
                self._applied_ports.pop(key, None)
        for key in self._pending_endpoints:
            merged = self._by_service[key].merged if key in self._by_service else {}
            if merged:
                self._applied_endpoints[key] = merged
            else:
                self._applied_endpoints.pop(key, None)
        self._pending_services.clear()
        self._pending_endpoints.clear()
        self._trigger_times.clear()
        return changes

    def service_ports(self) -> list[ServicePortInfo]:
        """Every service port, ordered as `build_service_ports` orders them."""
        if self._sorted_ports is None:
            self._sorted_ports = sorted((sp for ports in self._ports.values() for sp in ports),
                                        key=lambda sp: (sp.svc_port_name, sp.proto))
        return self._sorted_ports

    def ports_of(self, services: Iterable[str]) -> list[ServicePortInfo]:
        """These Services' ports, in `service_ports` order, without sorting every port (the
        nftables proxier's partial sync, whose work follows the change, not the cluster)."""
        return sorted((sp for service in services for sp in self._ports.get(service, ())),
                      key=lambda sp: (sp.svc_port_name, sp.proto))

    def endpoints_map(self) -> dict[EndpointsKey, tuple[EndpointInfo, ...]]:
        return self._endpoints_map

    def endpoints_total(self) -> int:
        """Endpoints summed over all service ports: over 1000 is kube-proxy's large-cluster mode."""
        return self._endpoints_total

    def _recount(self, service: str) -> None:
        """Keep the endpoint total current: kube-proxy counts every endpoint of every service port."""
        count = sum(len(self._endpoints_map.get(sp.endpoints_key, ())) for sp in self._ports.get(service, ()))
        self._endpoints_total += count - self._service_endpoint_counts.get(service, 0)
        if count:
            self._service_endpoint_counts[service] = count
        else:
            self._service_endpoint_counts.pop(service, None)
