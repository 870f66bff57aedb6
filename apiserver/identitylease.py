"""The API server's identity Lease and its garbage collector: kube-apiserver's post-start hooks
start-kube-apiserver-identity-lease-controller and start-kube-apiserver-identity-lease-garbage-collector.

Each API server keeps a Lease `kube-system/apiserver-<id>` labelled `apiserver.kubernetes.io/identity:
kube-apiserver` (and `kubernetes.io/hostname`), holder `<id>_<uuid>`, leaseDurationSeconds 3600, its
renewTime written every 10 s; so the API servers sharing an etcd can be counted by anyone with
`kubectl get lease -n kube-system -l apiserver.kubernetes.io/identity=kube-apiserver`. Every API
server also deletes, once an hour, the identity Leases whose renewTime is more than their duration in
the past (an API server gone for good).

`<id>` is kube's: the lowercase unpadded base32 of the first 16 bytes of the SHA-256 of the hostname and
"kube-apiserver", each prefixed with its length as two bytes (cryptobyte's Uint16LengthPrefixed). Two
API servers on one host therefore share a Lease, as they do in kube; `hostname` can be given to tell
them apart (several API servers on one machine, in kubelab's lab).

The writes go through the registry, as kube's controllers go through the server's loopback client.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from kubelab import kinds, timeutil, wellknown
from kubelab.selectors import parse_field_selector, parse_label_selector

from . import errors
from .registry import Registry

log = logging.getLogger(__name__)

IDENTITY_LABEL = "apiserver.kubernetes.io/identity"  # controlplane's IdentityLeaseComponentLabelKey
IDENTITY = "kube-apiserver"
HOSTNAME_LABEL = wellknown.HOSTNAME
NAMESPACE = "kube-system"
LEASE_DURATION_SECONDS = 3600  # IdentityLeaseDurationSeconds
RENEW_INTERVAL = 10.0  # IdentityLeaseRenewIntervalPeriod
GC_PERIOD = 3600.0  # IdentityLeaseGCPeriod
MAX_UPDATE_RETRIES = 5  # the lease controller's maxUpdateRetries


def apiserver_id(hostname: str) -> str:
    """kube-apiserver's APIServerID for `hostname`. Pure."""
    data = b"".join(len(part).to_bytes(2, "big") + part for part in (hostname.encode(), IDENTITY.encode()))
    digest = hashlib.sha256(data).digest()[:16]
    return "apiserver-" + base64.b32encode(digest).decode().rstrip("=").lower()


def is_expired(lease: dict[str, Any], now: datetime) -> bool:
    """The GC's isLeaseExpired: no renewTime or no duration, or renewTime + duration before now. Pure."""
    spec = lease.get("spec") or {}
    renew, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if renew is None or duration is None:
        return True
    try:
        renewed = datetime.fromisoformat(str(renew))
    except ValueError:
        return True
    return renewed + timedelta(seconds=int(duration)) < now


class IdentityLease:
    """Keeps this API server's identity Lease renewed, and collects the expired ones of any API server."""

    def __init__(self, registry: Registry, *, hostname: str | None = None, renew_interval: float = RENEW_INTERVAL,
                 gc_period: float = GC_PERIOD, now: Callable[[], datetime] = timeutil.now) -> None:
        self.registry = registry
        self.hostname = hostname or socket.gethostname()
        self.name = apiserver_id(self.hostname)
        self.holder = f"{self.name}_{uuid.uuid4()}"
        self.renew_interval = renew_interval
        self.gc_period = gc_period
        self._now = now

    def _labelled(self, lease: dict[str, Any]) -> dict[str, Any]:
        """labelAPIServerHeartbeatFunc: the identity and hostname labels, on every write."""
        meta = dict(lease.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), IDENTITY_LABEL: IDENTITY, HOSTNAME_LABEL: self.hostname}
        return {**lease, "metadata": meta}

    def _spec(self, lease: dict[str, Any]) -> dict[str, Any]:
        return {**(lease.get("spec") or {}), "holderIdentity": self.holder,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": timeutil.rfc3339_micro(self._now())}

    async def renew(self) -> None:
        """One heartbeat: write a new renewTime (the registry retries a conflicting write with the stored
        object, as the lease controller retries its update), or create the Lease when it is missing."""
        def renewed(current: dict[str, Any]) -> dict[str, Any]:
            return {**self._labelled(current), "spec": self._spec(current)}

        try:
            await self.registry.guaranteed_update(kinds.LEASES, NAMESPACE, self.name, renewed)
            return
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
        body = self._labelled({"metadata": {"name": self.name, "namespace": NAMESPACE}})
        try:
            await self.registry.create(kinds.LEASES, NAMESPACE, {**body, "spec": self._spec({})})
        except errors.StatusError as exc:
            if exc.code != 409:  # created by another API server of this host meanwhile: renewed next time
                raise

    async def collect(self) -> list[str]:
        """One pass of the GC: delete every expired identity Lease; return their names."""
        selector = parse_label_selector(f"{IDENTITY_LABEL}={IDENTITY}")
        leases, _ = await self.registry.list(kinds.LEASES, NAMESPACE, selector, parse_field_selector(None))
        deleted = []
        for listed in leases:
            name = listed["metadata"]["name"]
            try:  # judged on a fresh read, as the GC gets each lease again before deleting it
                if not is_expired(await self.registry.get(kinds.LEASES, NAMESPACE, name), self._now()):
                    continue
                await self.registry.delete(kinds.LEASES, NAMESPACE, name)
                deleted.append(name)
            except errors.StatusError as exc:
                if exc.code != 404:  # another API server's GC got there first
                    raise
        return deleted

    async def keep(self) -> None:
        """Renew every renew_interval until cancelled; a failed heartbeat is logged and tried again."""
        while True:
            for _ in range(MAX_UPDATE_RETRIES):
                try:
                    await self.renew()
                    break
                except Exception as exc:  # noqa: BLE001 - a heartbeat that failed (etcd away) is tried again
                    log.warning("failed to renew identity lease %s/%s: %s", NAMESPACE, self.name, exc)
            await asyncio.sleep(self.renew_interval)

    async def collect_forever(self) -> None:
        while True:
            try:
                for name in await self.collect():
                    log.info("deleted expired identity lease %s/%s", NAMESPACE, name)
            except Exception as exc:  # noqa: BLE001 - the next pass tries again
                log.warning("identity lease GC: %s", exc)
            await asyncio.sleep(self.gc_period)
