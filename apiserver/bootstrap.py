"""What kube-apiserver creates for itself at start: the system namespaces and the `kubernetes` Service.

The `kubernetes` Service in `default` gets the first address of the service range (10.96.0.1) and
port 443 (https); its Endpoints and EndpointSlice point at the address the API server serves on, and
the API server keeps them (the Service has no selector, so no controller touches them).
"""

from __future__ import annotations

import logging
from typing import Any

from kubelab import kinds

from . import errors
from .registry import Registry

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


async def bootstrap(registry: Registry, *, advertise_ip: str, port: int, service_ip: str) -> None:
    for name in SYSTEM_NAMESPACES:
        await registry.ensure(kinds.NAMESPACES, {"metadata": {"name": name}})
    await _reconcile_service(registry, service_ip, port)
    await _reconcile_endpoints(registry, advertise_ip, port)


async def _reconcile_service(registry: Registry, service_ip: str, port: int) -> None:
    """Create the `kubernetes` Service, or put back its ports and type when they differ from this
    server's (kube-apiserver's CreateOrUpdateMasterServiceIfNeeded): an API server restarted on
    another port must not leave 10.96.0.1:443 pointing at the old one."""
    ports = [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]
    try:
        await registry.create(kinds.SERVICES, "default", {
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": service_ip, "sessionAffinity": "None", "ports": ports}})
        return
    except errors.StatusError as exc:
        if exc.code != 409:
            raise

    def fix(current: dict[str, Any]) -> dict[str, Any]:
        spec = current.get("spec") or {}
        if spec.get("type") == "ClusterIP" and spec.get("ports") == ports:
            return current  # unchanged: the store writes nothing
        return {**current, "spec": {**spec, "type": "ClusterIP", "ports": ports}}

    await registry.guaranteed_update(kinds.SERVICES, "default", "kubernetes", fix)


async def _reconcile_endpoints(registry: Registry, ip: str, port: int) -> None:
    labels = {"endpointslice.kubernetes.io/skip-mirror": "true"}
    endpoints: dict[str, Any] = {
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
        "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}
    slice_: dict[str, Any] = {
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
    for rt, body in ((kinds.ENDPOINTS, endpoints), (kinds.ENDPOINTSLICES, slice_)):
        try:
            await registry.create(rt, "default", body)
        except errors.StatusError as exc:
            if exc.code != 409:
                raise

            def refresh(current: dict[str, Any], body: dict[str, Any] = body) -> dict[str, Any]:
                return {**current, **{k: v for k, v in body.items() if k != "metadata"}}

            await registry.guaranteed_update(rt, "default", "kubernetes", refresh)
