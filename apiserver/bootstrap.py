"""What kube-apiserver creates for itself at start: the system namespaces and the `kubernetes` Service.

The `kubernetes` Service in `default` gets the first address of the service range (10.96.0.1) and
port 443 (https); its Endpoints and EndpointSlice point at the address the API server serves on, and
the API server keeps them (the Service has no selector, so no controller touches them).
"""

from __future__ import annotations

import logging
from typing import Any

from kubelab import addressing, kinds

from . import errors
from .registry import Registry

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


async def bootstrap(registry: Registry, *, advertise_ip: str, port: int, service_ip: str) -> None:
    for name in SYSTEM_NAMESPACES:
        await registry.ensure(kinds.NAMESPACES, {"metadata": {"name": name}})
    await registry.ensure(kinds.SERVICES, {
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": service_ip, "sessionAffinity": "None",
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}})
    await _reconcile_endpoints(registry, advertise_ip, port)


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
            await registry.guaranteed_update(rt, "default", "kubernetes",
                                             lambda current, body=body: {**current, **{k: v for k, v in body.items()
                                                                                       if k != "metadata"}})
