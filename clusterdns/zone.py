"""The cluster zone as plain data: what `<zone>` holds, built from Services, EndpointSlices and Namespaces.

CoreDNS's kubernetes plugin answers from its informers' caches; kubelab builds this index from its
own informers' caches whenever they change, and `answers.py` reads only the index. Pure: no I/O, no
clock (the SOA serial is passed in).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubelab import validation, wellknown
from kubelab.models import EndpointSlice, Namespace, Service

SERVICE_NAME_LABEL = wellknown.SERVICE_NAME


@dataclass(frozen=True)
class Port:
    name: str  # "" for an unnamed port
    port: int
    protocol: str  # "TCP" | "UDP" | "SCTP"


@dataclass(frozen=True)
class EndpointAddress:
    ip: str
    hostname: str  # the endpoint's hostname, or "" (then its dashed IP names it)
    ports: tuple[Port, ...]

    @property
    def label(self) -> str:
        """The name of this endpoint under its Service: its hostname, else its IP with dashes (CoreDNS)."""
        return self.hostname or self.ip.replace(".", "-").replace(":", "-")


@dataclass(frozen=True)
class ServiceRecord:
    namespace: str
    name: str
    cluster_ips: tuple[str, ...]  # empty for headless and ExternalName Services
    headless: bool
    external_name: str  # "" unless type ExternalName
    ports: tuple[Port, ...]
    endpoints: tuple[EndpointAddress, ...] = ()  # ready endpoints only


@dataclass
class Zone:
    """Everything the server answers from, for one cluster domain."""

    domain: str = "cluster.local"
    services: dict[tuple[str, str], ServiceRecord] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    serial: int = 0  # the SOA serial: when the index last changed (Unix seconds, as CoreDNS)
    synced: bool = False  # False until the informers have listed: then every answer is SERVFAIL
    # Services left out because a name in them cannot be a DNS name ("namespace/name": why), and
    # endpoint hostnames dropped for the same reason: only objects stored without validation have them.
    skipped: dict[str, str] = field(default_factory=dict)


def _is_ready(ready: bool | None) -> bool:
    """CoreDNS counts an endpoint whose `ready` is true or unset as ready."""
    return ready is None or ready


def _endpoints(slices: Iterable[EndpointSlice]) -> tuple[EndpointAddress, ...]:
    found: dict[tuple[str, str], EndpointAddress] = {}
    for slice_ in slices:
        ports = tuple(Port(p.name or "", p.port, (p.protocol or "TCP").upper())
                      for p in slice_.ports or [] if p.port is not None)
        for endpoint in slice_.endpoints or []:
            if not _is_ready(endpoint.conditions.ready if endpoint.conditions else None):
                continue
            # A hostname names a record ("<hostname>.<svc>..."), so it must be a DNS label; one that is
            # not is dropped (the endpoint is then named by its IP), not the endpoint.
            hostname = endpoint.hostname or ""
            hostname = hostname if validation.is_dns1123_label(hostname) else ""
            for address in endpoint.addresses or []:
                try:
                    ip = str(validation.parse_ip(address))
                except ValueError:
                    continue
                key = (ip, hostname)
                if key in found:  # the same address in slices of several port sets: merge the ports
                    merged = tuple(dict.fromkeys(found[key].ports + ports))
                    found[key] = EndpointAddress(ip, hostname, merged)
                else:
                    found[key] = EndpointAddress(ip, hostname, ports)
    return tuple(sorted(found.values(), key=lambda e: (ipaddress.ip_address(e.ip).packed, e.hostname)))


def service_problem(service: Service) -> str | None:
    """Why `service` cannot be served (its names become the owner names of records, and an ExternalName
    the target of a CNAME), or None. The API server refuses such Services; one stored without
    validation is left out of the zone, not allowed to break the answers of every other name."""
    meta = service.metadata
    if not validation.is_dns1123_label(meta.namespace or ""):
        return f"namespace {meta.namespace!r} is not a DNS label"
    if not validation.is_dns1035_label(meta.name or ""):
        return f"name {meta.name!r} is not a DNS-1035 label"
    spec = service.spec
    external = (spec.external_name or "") if spec and spec.type == "ExternalName" else None
    if external is not None and not validation.is_dns1123_subdomain(external.rstrip(".")):
        return f"externalName {external!r} is not a DNS name"
    return None


def service_record(service: Service, slices: Iterable[EndpointSlice]) -> ServiceRecord:
    spec = service.spec
    cluster_ip = (spec.cluster_ip if spec else None) or ""
    headless = cluster_ip == "None"
    external = (spec.external_name or "") if spec and spec.type == "ExternalName" else ""
    ips: tuple[str, ...] = ()
    if not headless and not external:
        listed = (spec.cluster_ips if spec else None) or ([cluster_ip] if cluster_ip else [])
        ips = tuple(ip for ip in listed if ip and ip != "None" and validation.is_ip(ip))
    ports = tuple(Port(p.name or "", p.port, (p.protocol or "TCP").upper())
                  for p in (spec.ports if spec else None) or [] if p.port is not None)
    return ServiceRecord(namespace=service.metadata.namespace or "", name=service.metadata.name or "",
                         cluster_ips=ips, headless=headless, external_name=external.rstrip("."), ports=ports,
                         endpoints=_endpoints(slices))


def build_zone(services: Iterable[Service], slices: Iterable[EndpointSlice], namespaces: Iterable[Namespace],
               *, domain: str = "cluster.local", serial: int = 0) -> Zone:
    """The index of one cluster domain. Slices belong to a Service by their `kubernetes.io/service-name`
    label (any manager: the controller's, or one a component writes itself, as for kube-dns)."""
    by_service: dict[tuple[str, str], list[EndpointSlice]] = {}
    for slice_ in slices:
        name = (slice_.metadata.labels or {}).get(SERVICE_NAME_LABEL)
        if name:
            by_service.setdefault((slice_.metadata.namespace or "", name), []).append(slice_)
    zone = Zone(domain=domain.strip(".").lower(), serial=serial, synced=True,
                namespaces={ns.metadata.name or "" for ns in namespaces})
    for service in services:
        key = (service.metadata.namespace or "", service.metadata.name or "")
        problem = service_problem(service)
        if problem is not None:
            zone.skipped[f"{key[0]}/{key[1]}"] = problem
            continue
        zone.services[key] = service_record(service, by_service.get(key, []))
    return zone
