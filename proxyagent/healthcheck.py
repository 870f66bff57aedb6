"""Health-check NodePorts: kube-proxy's ServiceHealthServer (pkg/proxy/healthcheck/service_health.go),
one for both proxy modes.

A LoadBalancer Service with externalTrafficPolicy Local gets spec.healthCheckNodePort; every
kube-proxy serves HTTP on it so that the cloud load balancer sends traffic only to nodes that have a
ready endpoint of the Service (the others would drop it). After each successful sync the proxier hands
over the health-check ports of its Services (SyncServices: new ports opened, gone or changed ones
closed) and each Service's local ready endpoints (SyncEndpoints). A request on any path and with any
method is answered 200 when the node has at least one and the proxier itself is healthy (its
/healthz), 503 otherwise, with the count in X-Load-Balancing-Endpoint-Weight and a small JSON body:

    {
    	"service": {
    		"namespace": "default",
    		"name": "web"
    	},
    	"localEndpoints": 1,
    	"serviceProxyHealthy": true
    }

(tab-indented, no trailing newline, as upstream's dedented template prints it).

It listens where kube-proxy does: on 0.0.0.0 when --nodeport-addresses selects every address, else on
each node IP the addresses select; inside the node's network namespace (the socket is made by a thread
that entered it, kubelab/netnsthread.py). A port that cannot be opened (in use) is logged and tried
again at the next sync, as upstream (which also records a FailedToStartServiceHealthcheck event on
the Service: not here). Endpoints are counted per Service over all its ports, as upstream's
LocalReadyEndpoints does (kubernetes#106713: a two-port Service counts each endpoint twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kubelab.netnsthread import run_in_netns

from .render import AddressConfig, nodeport_cidrs_of
from .serviceports import EndpointInfo, EndpointsKey, ServicePortInfo, family_of, parse_ip_sloppy

log = logging.getLogger(__name__)

_REASONS = {200: "OK", 503: "Service Unavailable"}
_REQUEST_TIMEOUT = 10.0  # seconds a client may take to send its request line and headers


def listen_addresses(config: AddressConfig) -> tuple[str, ...]:
    """Where the health-check ports listen: every address when --nodeport-addresses selects every
    one ("0.0.0.0", which Go's listener also takes for IPv6), else the node IPs they select."""
    cidrs = nodeport_cidrs_of(config)
    if not cidrs:
        return ("0.0.0.0",)
    found = set()
    for text in config.node_ips:
        ip = parse_ip_sloppy(text)
        if ip is not None and family_of(ip) == config.ip_family and any(ip in net for net in cidrs):
            found.add(ip)
    return tuple(str(ip) for ip in sorted(found, key=lambda ip: ip.packed))


def health_check_ports(ports: Iterable[tuple[str, int]]) -> dict[str, int]:
    """ServicePortMap.HealthCheckNodePorts: "namespace/name" -> port, from the (key, port) pairs the
    renderers collect."""
    return {key: number for key, number in ports if number}


def local_ready_endpoints(services: Iterable[str], ports_of: Callable[[Iterable[str]], list[ServicePortInfo]],
                          endpoints: Mapping[EndpointsKey, tuple[EndpointInfo, ...]]) -> dict[str, int]:
    """EndpointsMap.LocalReadyEndpoints for these Services: ready endpoints on this node, summed
    over the Service's ports (upstream's double count included); Services with none are left out."""
    counts: dict[str, int] = {}
    for sp in ports_of(services):
        n = sum(1 for e in endpoints.get(sp.endpoints_key, ()) if e.is_local and e.ready)
        if n:
            counts[sp.service_key] = counts.get(sp.service_key, 0) + n
    return counts


def respond(key: str, local_endpoints: int, proxy_healthy: bool) -> tuple[int, dict[str, str], bytes]:
    """hcHandler.ServeHTTP: (status, headers, body). Pure."""
    namespace, _, name = key.partition("/")
    status = 200 if local_endpoints and proxy_healthy else 503
    headers = {"Content-Type": "application/json", "X-Content-Type-Options": "nosniff",
               "X-Load-Balancing-Endpoint-Weight": str(local_endpoints)}
    body = ('{\n\t"service": {\n'
            f'\t\t"namespace": {json.dumps(namespace)},\n'
            f'\t\t"name": {json.dumps(name)}\n'
            '\t},\n'
            f'\t"localEndpoints": {local_endpoints},\n'
            f'\t"serviceProxyHealthy": {"true" if proxy_healthy else "false"}\n'
            '}')
    return status, headers, body.encode()


@dataclass
class _Instance:
    """One Service's health check (hcInstance): its port, its listeners, its local endpoint count."""

    port: int
    servers: list[asyncio.Server] = field(default_factory=list)
    endpoints: int = 0


class ServiceHealthServer:
    """The health-check ports of one node's proxier. `healthy()` is the proxier's own health (its
    /healthz verdict); `netns` the network namespace the ports are opened in (None: this one)."""

    def __init__(self, *, node_name: str, addresses: Iterable[str], netns: str | None = None,
                 healthy: Callable[[], bool] = lambda: True) -> None:
        self.node_name = node_name
        self.addresses = tuple(addresses)
        self.netns = netns
        self.healthy = healthy
        self._services: dict[str, _Instance] = {}

    @property
    def ports(self) -> dict[str, int]:
        """The health checks being served: "namespace/name" -> port."""
        return {key: hc.port for key, hc in self._services.items()}

    async def sync_services(self, wanted: Mapping[str, int]) -> None:
        """SyncServices: close the checks no longer wanted (or on another port), open the new ones."""
        for key, hc in list(self._services.items()):
            if wanted.get(key) != hc.port:
                log.info("%s: closing health check of %s on port %d", self.node_name, key, hc.port)
                del self._services[key]
                await _close(hc.servers)
        for key, number in sorted(wanted.items()):
            if key in self._services:
                continue
            hc = _Instance(number)
            try:
                for address in self.addresses:
                    sock = await asyncio.to_thread(run_in_netns, self.netns, functools.partial(_bind, address, number),
                                                   name=f"healthcheck-{self.node_name}")
                    hc.servers.append(await asyncio.start_server(functools.partial(self._handle, key), sock=sock))
            except OSError as exc:
                # Closed again, so that a port freed later (or moved to another Service) can be taken.
                await _close(hc.servers)
                log.error("%s: failed to start health check of %s on port %d: %s (retried at the next sync)",
                          self.node_name, key, number, exc)
                continue
            log.info("%s: health check of %s on port %d", self.node_name, key, number)
            self._services[key] = hc

    def sync_endpoints(self, counts: Mapping[str, int]) -> None:
        """SyncEndpoints: every served Service's local ready endpoints (0 when it has none)."""
        for key, hc in self._services.items():
            hc.endpoints = counts.get(key, 0)

    async def close(self) -> None:
        await self.sync_services({})

    async def _handle(self, key: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=_REQUEST_TIMEOUT)
            while (await asyncio.wait_for(reader.readline(), timeout=_REQUEST_TIMEOUT)).strip():
                pass
            hc = self._services.get(key)
            headers: dict[str, str] = {}
            if hc is None:
                # "Received request for closed healthcheck": upstream writes nothing (an empty 200).
                status, body = 200, b""
            else:
                status, headers, body = respond(key, hc.endpoints, self.healthy())
            head = f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in headers.items())
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            head_only = request.split(b" ", 1)[0] == b"HEAD"
            writer.write(head.encode() + (b"" if head_only else body))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _bind(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners on Linux
        sock.bind((address, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def _close(servers: list[asyncio.Server]) -> None:
    for server in servers:
        server.close()
    for server in servers:
        await server.wait_closed()
    servers.clear()
