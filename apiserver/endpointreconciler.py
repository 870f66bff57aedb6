"""The `default/kubernetes` Service's Endpoints and EndpointSlices, kept by every API server of a cluster
together: kube-apiserver's lease endpoint reconciler (`--endpoint-reconciler-type=lease`, its default;
pkg/controlplane/reconcilers/lease.go).

Every `INTERVAL` (kube's DefaultEndpointReconcilerInterval, 10 s) each API server writes its own master
lease, a key under /registry/masterleases/ on an etcd lease of `TTL` seconds (DefaultEndpointReconcilerTTL,
15 s), then lists the keys there and rewrites the Endpoints and EndpointSlice of `default/kubernetes` when
they name other servers than the keys do. An API server that dies stops refreshing its key; etcd drops it
after the TTL, and the next reconcile of any live API server drops its endpoint. One that stops cleanly
deletes its key and reconciles at once (RemoveEndpoints). As in kube, an empty listing right after our own
write is taken for a storage fault and changes nothing, except when stopping.

Where kubelab differs, and why: kube keys a lease by the API server's IP alone (`masterleases/<ip>`), since
every kube-apiserver of a cluster serves on one port, and its Endpoints have one subset with that port.
kubelab's lab runs several API servers on 127.0.0.1 on different ports, so a lease is keyed `<ip>:<port>`
and its value (an Endpoints, as kube stores it) carries the port too. Endpoints allow one port list per
subset, so the servers are grouped by port: one subset per port, in port order, each listing the IPs
serving on it; with one port for all (kube's case) that is exactly kube's single subset. An EndpointSlice
has one port list too: the group of the lowest port is the `kubernetes` slice, as in kube, and each other
port's group is a slice `kubernetes-<port>` of its own. kube-proxy matches a Service port to endpoint
ports by name (`https`), never by number, so 10.96.0.1:443 spreads over every live API server whatever
its port.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any

import orjson

from kubelab import kinds, wellknown
from kubelab.selectors import parse_field_selector, parse_label_selector
from kubelab.validation import is_ascii_digits

from . import errors
from .registry import Registry
from .storage import Storage

log = logging.getLogger(__name__)

PREFIX = "/registry/masterleases/"
TTL = 15  # DefaultEndpointReconcilerTTL, seconds
INTERVAL = 10.0  # DefaultEndpointReconcilerInterval, seconds
SERVICE = "kubernetes"
NAMESPACE = "default"
PORT_NAME = "https"
SERVICE_NAME_LABEL = wellknown.SERVICE_NAME
# The Endpoints are written by the reconciler, not mirrored (kube's reconciler labels them so).
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"

Member = tuple[str, int]  # (ip, port) of one live API server


class NoLeases(RuntimeError):
    """No master lease listed right after writing ours: kube's "no master IPs were listed in storage,
    refusing to erase all endpoints for the kubernetes service"."""


def lease_key(member: Member) -> str:
    return f"{PREFIX}{member[0]}:{member[1]}"


def lease_value(member: Member) -> bytes:
    """What a master lease holds: an Endpoints naming the one server (kube's UpdateLease), with its port."""
    ip, port = member
    return orjson.dumps({"kind": "Endpoints", "apiVersion": "v1", "metadata": {"name": f"{ip}:{port}"},
                         "subsets": [{"addresses": [{"ip": ip}], "ports": [{"port": port, "protocol": "TCP"}]}]})


def parse_lease(value: bytes) -> Member | None:
    """The server a lease names; None for a value that is not one (never fails the reconcile). Pure."""
    try:
        subset = orjson.loads(value)["subsets"][0]
        ip, port = str(subset["addresses"][0]["ip"]), subset["ports"][0]["port"]
        ipaddress.ip_address(ip)
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        return None
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        return None
    return ip, port


def _by_port(members: list[Member]) -> list[tuple[int, list[str]]]:
    ports: dict[int, set[str]] = {}
    for ip, port in members:
        ports.setdefault(port, set()).add(ip)
    return [(port, sorted(ips, key=ipaddress.ip_address)) for port, ips in sorted(ports.items())]


def expected_subsets(members: list[Member]) -> list[dict[str, Any]]:
    """The Endpoints' subsets: one per port, in port order, its IPs in address order. Pure."""
    return [{"addresses": [{"ip": ip} for ip in ips], "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}
            for port, ips in _by_port(members)]


def slice_name(index: int, port: int) -> str:
    return SERVICE if index == 0 else f"{SERVICE}-{port}"


def expected_slices(members: list[Member]) -> dict[str, dict[str, Any]]:
    """The EndpointSlices by name: `kubernetes` for the lowest port's servers, `kubernetes-<port>` for each
    other port's. Pure."""
    out = {}
    for index, (port, ips) in enumerate(_by_port(members)):
        out[slice_name(index, port)] = {
            "addressType": "IPv6" if ":" in ips[0] else "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}
    return out


def _owned_slice(name: str) -> bool:
    """A slice this reconciler writes: `kubernetes`, or `kubernetes-<digits>`."""
    rest = name.removeprefix(f"{SERVICE}-")
    return name == SERVICE or (rest != name and is_ascii_digits(rest))


class LeaseEndpointReconciler:
    """One API server's part: its master lease, and the kubernetes Service's endpoints from all the leases."""

    def __init__(self, registry: Registry, storage: Storage, member: Member, *, ttl: int = TTL,
                 interval: float = INTERVAL) -> None:
        self.registry = registry
        self.storage = storage
        self.member = member
        self.ttl = ttl
        self.interval = interval
        self._lock = asyncio.Lock()  # reconcile and remove never interleave (kube's reconcilingLock)
        self._stopped = False

    async def members(self) -> list[Member]:
        found = {m for _, value in await self.storage.list_raw(PREFIX) if (m := parse_lease(value)) is not None}
        return sorted(found)

    async def reconcile(self) -> None:
        """ReconcileEndpoints: refresh our lease, then make the endpoints match the leases."""
        async with self._lock:
            if self._stopped:
                return
            await self.storage.put_expiring(lease_key(self.member), lease_value(self.member), self.ttl)
            members = await self.members()
            if not members:
                raise NoLeases("no master IPs were listed in storage, refusing to erase all endpoints for the "
                               "kubernetes service")
            await self._write(members)

    async def remove(self) -> None:
        """RemoveEndpoints, when this API server stops: delete our lease and reconcile without it; the last
        one to stop leaves the Service without endpoints, as kube's does."""
        async with self._lock:
            self._stopped = True
            await self.storage.delete_raw(lease_key(self.member))
            await self._write(await self.members())

    async def run(self) -> None:
        """Reconcile every interval until cancelled; a failed pass (etcd away) is logged and tried again."""
        while True:
            try:
                await self.reconcile()
            except Exception as exc:  # noqa: BLE001 - the next pass tries again, as kube's loop does
                log.warning("unable to reconcile the kubernetes service's endpoints: %s", exc)
            await asyncio.sleep(self.interval)

    async def _write(self, members: list[Member]) -> None:
        subsets = expected_subsets(members)
        endpoints = {"metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {SKIP_MIRROR_LABEL: "true"}},
                     "subsets": subsets}
        await self._put(kinds.ENDPOINTS, SERVICE, endpoints, lambda current: {"subsets": subsets})
        wanted = expected_slices(members)
        for name, body in wanted.items():
            full = {"metadata": {"name": name, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: SERVICE}},
                    **body}
            await self._put(kinds.ENDPOINTSLICES, name, full, lambda current, body=body: body)
        listed, _ = await self.registry.list(kinds.ENDPOINTSLICES, NAMESPACE,
                                             parse_label_selector(f"{SERVICE_NAME_LABEL}={SERVICE}"),
                                             parse_field_selector(None))
        for stale in listed:
            name = stale["metadata"]["name"]
            if _owned_slice(name) and name not in wanted:
                try:
                    await self.registry.delete(kinds.ENDPOINTSLICES, NAMESPACE, name)
                except errors.StatusError as exc:
                    if exc.code != 404:  # another API server deleted it first
                        raise

    async def _put(self, rt: kinds.ResourceType, name: str, body: dict[str, Any], fields: Any) -> None:
        """Create the object, or set `fields(current)` on the stored one (no write when they already hold)."""
        def update(current: dict[str, Any]) -> dict[str, Any]:
            wanted = fields(current)
            if all(current.get(k) == v for k, v in wanted.items()):
                return current  # unchanged: the store writes nothing
            return {**current, **wanted}

        try:
            await self.registry.guaranteed_update(rt, NAMESPACE, name, update)
            return
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
        try:
            await self.registry.create(rt, NAMESPACE, body)
        except errors.StatusError as exc:
            if exc.code != 409:
                raise
            await self.registry.guaranteed_update(rt, NAMESPACE, name, update)
