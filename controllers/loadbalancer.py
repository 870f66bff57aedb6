"""The LoadBalancer controller: the lab's cloud load balancer, MetalLB-style.

Every `type: LoadBalancer` Service without a `spec.loadBalancerClass` (a class means another
implementation owns it) gets one address from a pool, written to `status.loadBalancer.ingress` as
`{ip, ipMode: VIP}` through the services/status subresource, as a cloud controller manager does.
kube-proxy then programs it like any load-balancer VIP (KUBE-SERVICES "loadbalancer IP" rules, the
KUBE-FW chain for loadBalancerSourceRanges). Nothing announces the address: traffic reaches a node
only where a route sends it (a lab client's route to the pool via a node).

Allocation (`assign_addresses`) is a pure function of all Services, so it is level-triggered and
survives restarts: an address written in a Service's status stays its own while the Service wants
it; `spec.loadBalancerIP` (deprecated in Kubernetes, still honoured by MetalLB) is used when it is
in the pool and free, and otherwise the Service waits without an address; everyone else gets the
lowest free address, oldest Service first. An address is never given to two Services; when two
statuses claim the same one (written by hand, say) the older Service keeps it. Deleting a Service or
changing its type frees its address; a Service that stops being a LoadBalancer has its ingress
cleared.

The pool is "FIRST-LAST" or a CIDR. The default, 172.18.255.200-172.18.255.250 (MetalLB's example
range for kind), lies outside every lab range (nodes 10.240.0.0/24, pods 10.244.0.0/16, services
10.96.0.0/12); only routes inside the lab's namespaces ever lead to it.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kubelab import addressing, kinds
from kubelab.client import ApiClient, Informer, NotFound, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus

from .queuecontroller import QueueController

log = logging.getLogger(__name__)

DEFAULT_POOL = addressing.LB_POOL
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Pool:
    """A contiguous range of addresses, both ends included."""

    first: IPAddress
    last: IPAddress

    @classmethod
    def parse(cls, text: str) -> Pool:
        """"172.18.255.200-172.18.255.250" or "172.18.255.192/27" (a CIDR's network and broadcast
        addresses are left out, except in a /31 or /32). Raises ValueError."""
        text = text.strip()
        if "-" in text:
            low, _, high = text.partition("-")
            first, last = ipaddress.ip_address(low.strip()), ipaddress.ip_address(high.strip())
        else:
            net = ipaddress.ip_network(text, strict=False)
            first, last = net.network_address, net.broadcast_address
            if net.num_addresses > 2:
                first, last = first + 1, last - 1
        if first.version != last.version or int(first) > int(last):
            raise ValueError(f"not an address range: {text!r}")
        return cls(first, last)

    @property
    def family(self) -> str:
        return "IPv4" if self.first.version == 4 else "IPv6"

    def __contains__(self, ip: object) -> bool:
        if not isinstance(ip, str):
            return False
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return addr.version == self.first.version and int(self.first) <= int(addr) <= int(self.last)

    def __iter__(self) -> Iterator[str]:
        for value in range(int(self.first), int(self.last) + 1):
            yield str(ipaddress.ip_address(value) if self.first.version == 4 else ipaddress.IPv6Address(value))

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


def is_managed(service: Service) -> bool:
    """A LoadBalancer Service this controller serves: no loadBalancerClass (another implementation's)."""
    spec = service.spec
    return spec is not None and spec.type == "LoadBalancer" and not spec.load_balancer_class


def ingress_ips(service: Service) -> list[str]:
    status = service.status
    ingress = status.load_balancer.ingress if status and status.load_balancer else None
    return [i.ip for i in ingress or [] if i.ip]


def _wants_family(service: Service, family: str) -> bool:
    families = service.spec.ip_families if service.spec else None
    return not families or family in families


def _age_key(service: Service) -> tuple[str, str]:
    # RFC 3339 timestamps in UTC sort as strings; the key breaks ties deterministically.
    return service.metadata.creation_timestamp or "", service.key


def assign_addresses(services: Iterable[Service], pool: Pool) -> dict[str, str | None]:
    """The address every managed Service should have: "namespace/name" -> IP, or None when none
    can be given (pool exhausted, or the requested loadBalancerIP is outside the pool or taken).
    Pure."""
    managed = sorted((s for s in services if is_managed(s) and _wants_family(s, pool.family)), key=_age_key)
    owner: dict[str, str] = {}  # ip -> service key
    result: dict[str, str | None] = {}
    # 1. Keep what a Service already has, oldest first, if it is still valid for it.
    for svc in managed:
        requested = svc.spec.load_balancer_ip if svc.spec else None
        for ip in ingress_ips(svc):
            if ip in pool and ip not in owner and (not requested or ip == requested):
                owner[ip] = svc.key
                result[svc.key] = ip
                break
    # 2. Requested addresses.
    for svc in managed:
        requested = svc.spec.load_balancer_ip if svc.spec else None
        if svc.key in result or not requested:
            continue
        if requested in pool and requested not in owner:
            owner[requested] = svc.key
            result[svc.key] = requested
        else:
            result[svc.key] = None
    # 3. The lowest free address for everyone else.
    free = (ip for ip in pool if ip not in owner)
    for svc in managed:
        if svc.key not in result:
            given = next(free, None)
            result[svc.key] = given
            if given is not None:
                owner[given] = svc.key
    return result


def _revision(service: Service) -> int:
    try:
        return int(service.metadata.resource_version or 0)
    except ValueError:  # not an etcd revision: no order to go by
        return 0


def desired_ingress(ip: str | None) -> list[dict[str, str]]:
    return [{"ip": ip, "ipMode": "VIP"}] if ip else []


def _current_ingress(service: Service) -> list[dict[str, object]]:
    status = service.status
    ingress = status.load_balancer.ingress if status and status.load_balancer else None
    return [i.to_dict() for i in ingress or []]


class LoadBalancerController(QueueController):
    """reconcile("ns/name"): compute all assignments from the cache, write this Service's status if
    it differs. One worker, and what it wrote counts until the cache shows it: the watch event of a
    write can come after the next Service's turn, which then saw the address as free and was handed it
    too (a loaded run of the restart test; MetalLB's controller keeps its allocations in memory)."""

    name = "loadbalancer-controller"
    max_workers = 1

    def __init__(self, api: ApiClient, services: Informer[Service], pool: Pool) -> None:
        self.api = api
        self.services = services
        self.pool = pool
        self.queue = WorkQueue(self.name)
        self.events = EventRecorder(api, "loadbalancer-controller")
        self._reported: dict[str, str] = {}  # key -> last "cannot allocate" message
        self._written: dict[str, Service] = {}  # key -> the Service as written, until the cache is as new
        services.add_handler(self._on_service)

    def _on_service(self, event: str, old: Service | None, new: Service | None) -> None:
        for key in self.keys_to_reconcile(old, new):
            self.queue.add(key)

    def initial_keys(self) -> Iterable[str]:
        return [svc.key for svc in self.services.items()]

    def keys_to_reconcile(self, old: Service | None, new: Service | None) -> list[str]:
        """For a Service event: that Service, plus, when the event may have freed an address (a
        delete, a type change, an address given up), every managed Service still waiting for one."""
        obj = new or old
        if obj is None:
            return []
        keys = [obj.key]
        freed = old is not None and any(ip in self.pool for ip in ingress_ips(old)) and (
            new is None or not is_managed(new) or ingress_ips(new) != ingress_ips(old))
        if freed:
            keys += [s.key for s in self.services.items()
                     if s.key != obj.key and is_managed(s) and not ingress_ips(s)]
        return keys

    def _known(self) -> dict[str, Service]:
        """The cache's Services, each replaced by what this controller wrote to it while the cache has
        not caught up with that write."""
        known = {}
        for svc in self.services.items():
            written = self._written.get(svc.key)
            if written is not None:
                if written.metadata.uid == svc.metadata.uid and _revision(written) > _revision(svc):
                    svc = written
                else:
                    del self._written[svc.key]  # the cache is as new (or it is another Service now)
            known[svc.key] = svc
        for key in self._written.keys() - known.keys():
            del self._written[key]  # deleted
        return known

    async def reconcile(self, key: str) -> None:
        known = self._known()
        service = known.get(key)
        if service is None:
            self._reported.pop(key, None)
            return  # deleted: its address is free as soon as it left the cache
        if not is_managed(service):
            spec = service.spec
            # Released on a type change; a Service with a class belongs to someone else.
            if spec is not None and spec.type != "LoadBalancer" and any(ip in self.pool for ip in ingress_ips(service)):
                await self._write(service, [])
            return
        ip = assign_addresses(known.values(), self.pool).get(key)
        if ip is None:
            self._report_failure(service)
        else:
            self._reported.pop(key, None)
        wanted = desired_ingress(ip)
        if _current_ingress(service) == wanted:
            return
        if await self._write(service, wanted) and ip is not None:
            self.events.event(service, "Normal", "IPAllocated", f'Assigned IP ["{ip}"]')

    def _report_failure(self, service: Service) -> None:
        requested = service.spec.load_balancer_ip if service.spec else None
        if requested and requested not in self.pool:
            message = f"Failed to allocate IP for \"{service.key}\": {requested} is not in the pool {self.pool}"
        elif requested:
            message = f"Failed to allocate IP for \"{service.key}\": {requested} is already in use"
        else:
            message = f"Failed to allocate IP for \"{service.key}\": no available IPs in the pool {self.pool}"
        if self._reported.get(service.key) != message:
            self._reported[service.key] = message
            log.warning("loadbalancer: %s", message)
            self.events.event(service, "Warning", "AllocationFailed", message)

    async def _write(self, service: Service, ingress: list[dict[str, str]]) -> bool:
        """PUT services/status with `ingress`; a conflict raises (the work queue retries with the
        fresh object), a vanished Service is fine. True if written."""
        updated = service.copy_deep()
        status = updated.status or ServiceStatus()
        status.load_balancer = LoadBalancerStatus(
            ingress=[LoadBalancerIngress.model_validate(i) for i in ingress] or None)
        updated.status = status
        try:
            self._written[service.key] = await self.api.update_status(kinds.SERVICES, updated)
        except NotFound:
            return False
        log.info("loadbalancer: %s ingress %s", service.key, [i["ip"] for i in ingress] or "cleared")
        return True
