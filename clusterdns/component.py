"""The DNS component: informers feed a zone index, the server answers from it (`run`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dns.message

from kubelab import addressing, kinds
from kubelab.client import ApiClient, ApiError, Informer, TransportError
from kubelab.models import EndpointSlice, Namespace, Service

from . import registration
from .answers import TTL, answer
from .server import DnsServer, Sockets, open_sockets
from .zone import Zone, build_zone

log = logging.getLogger(__name__)


@dataclass
class DnsOptions:
    listen_host: str = "0.0.0.0"
    listen_port: int = 53
    netns: str | None = None  # open the sockets inside this named network namespace
    metrics_port: int | None = 9153
    advertise_ip: str | None = None  # write kube-dns's Endpoints/EndpointSlice pointing here
    service_ip: str = addressing.CLUSTER_DNS_IP
    domain: str = addressing.CLUSTER_DOMAIN
    ttl: int = TTL


class ZoneCache:
    """The zone, rebuilt from the informers' caches at the first query after any change."""

    def __init__(self, services: Informer[Service], slices: Informer[EndpointSlice],
                 namespaces: Informer[Namespace], domain: str) -> None:
        self.informers = (services, slices, namespaces)
        self.domain = domain
        self._zone = Zone(domain=domain)
        self._dirty = True
        self._skipped: set[str] = set()
        for informer in self.informers:
            informer.add_handler(self._changed)

    def _changed(self, event: str, old: object, new: object) -> None:
        self._dirty = True

    def zone(self) -> Zone:
        if not all(i.has_synced() for i in self.informers):
            return Zone(domain=self.domain)  # synced=False: SERVFAIL, as CoreDNS before its informers list
        if self._dirty:
            services, slices, namespaces = self.informers
            self._dirty = False
            self._zone = build_zone(services.items(), slices.items(), namespaces.items(), domain=self.domain,
                                    serial=int(time.time()))
            # Each Service left out is logged once, when it first is, not at every rebuild.
            for key in sorted(set(self._zone.skipped) - self._skipped):
                log.warning("leaving Service %r out of the zone: %s", key, self._zone.skipped[key])
            self._skipped = set(self._zone.skipped)
        return self._zone


async def _register(api: ApiClient, options: DnsOptions, sockets: Sockets) -> None:
    """Create kube-dns (and, with an advertised address, its endpoints), retrying until the API answers."""
    metrics_port = sockets.metrics.getsockname()[1] if sockets.metrics is not None else None
    if not options.advertise_ip:
        # Nothing points the Service at this server, so it keeps kubeadm's ports as they are.
        await _ensure_all(api, [(kinds.SERVICES, registration.service(options.service_ip))])
        return
    objects = [(kinds.SERVICES, registration.service(options.service_ip, dns_port=sockets.port,
                                                      metrics_port=metrics_port))]
    if options.advertise_ip:
        objects += [(kinds.ENDPOINTS, registration.endpoints(options.advertise_ip, dns_port=sockets.port,
                                                             metrics_port=metrics_port)),
                    (kinds.ENDPOINTSLICES, registration.endpoint_slice(
                        options.advertise_ip, dns_port=sockets.port, metrics_port=metrics_port))]
    await _ensure_all(api, objects)


async def _ensure_all(api: ApiClient, objects: list[tuple[kinds.ResourceType, dict[str, Any]]]) -> None:
    delay = 0.5
    for rt, body in objects:
        while True:
            try:
                await registration.ensure(api, rt, body)
                break
            except (ApiError, TransportError, OSError) as exc:  # an API server not up yet is a TransportError
                log.warning("cannot write %s kube-system/kube-dns yet: %s", rt.kind, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)


async def run(api: ApiClient, options: DnsOptions | None = None, *,
              listening: Callable[[Sockets], None] | None = None) -> None:
    """Serve cluster DNS until cancelled. `listening(sockets)` is called once the sockets are bound."""
    options = options or DnsOptions()
    services: Informer[Service] = Informer(api, kinds.SERVICES, name="dns-services")
    slices: Informer[EndpointSlice] = Informer(api, kinds.ENDPOINTSLICES, name="dns-slices")
    namespaces: Informer[Namespace] = Informer(api, kinds.NAMESPACES, name="dns-namespaces")
    cache = ZoneCache(services, slices, namespaces, options.domain)

    def respond(query: dns.message.Message) -> dns.message.Message:
        return answer(cache.zone(), query, ttl=options.ttl)

    sockets = await asyncio.to_thread(open_sockets, options.listen_host, options.listen_port,
                                      netns=options.netns, metrics_port=options.metrics_port)
    try:
        where = f" in network namespace {options.netns}" if options.netns else ""
        log.info("serving %s on %s:%d (udp, tcp)%s", options.domain, options.listen_host,
                 sockets.port, where)
        if listening is not None:
            listening(sockets)
        server = DnsServer(respond, zone=options.domain + ".")
        async with asyncio.TaskGroup() as tg:
            for informer in (services, slices, namespaces):
                tg.create_task(informer.run(), name=f"{informer.name}-informer")
            tg.create_task(server.serve(sockets), name="clusterdns-server")
            tg.create_task(_register(api, options, sockets), name="clusterdns-register")
    finally:
        sockets.close()
