"""Services and EndpointSlices for proxy-agent tests, written the way the API server stores them.

Shared by unit, CLI and end-to-end tests of the proxy agent (tests/unit, tests/e2e put `tests/` on
sys.path through their conftest or rootdir; import as `from proxyobjects import ...`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from kubelab.models import EndpointSlice, Service

P = TypeVar("P")  # a proxyagent Proxier (not imported here: the API-object helpers need none of it)


def service_dict(ns: str, name: str, *, cluster_ip: str, ports: list[dict[str, Any]], svc_type: str = "ClusterIP",
                 ingress: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None,
                 **spec: Any) -> dict[str, Any]:
    """A v1 Service as JSON; `spec` keys are wire (camelCase) names."""
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": ns, "name": name, **({"labels": labels} if labels else {})},
        "spec": {"type": svc_type, "clusterIP": cluster_ip, "clusterIPs": [cluster_ip], "ports": ports, **spec},
    }
    if ingress is not None:
        obj["status"] = {"loadBalancer": {"ingress": ingress}}
    return obj


def slice_dict(ns: str, service: str, endpoints: list[dict[str, Any]], ports: list[dict[str, Any]], *,
               name: str | None = None, annotations: dict[str, str] | None = None,
               labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A discovery.k8s.io/v1 EndpointSlice as JSON, labelled for `service`."""
    meta: dict[str, Any] = {"namespace": ns, "name": name or f"{service}-abcde",
                            "labels": {"kubernetes.io/service-name": service, **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta,
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports}


def ep(ip: str, node: str | None = None, **conditions: bool) -> dict[str, Any]:
    """One endpoint; conditions left out read as ready (kube-proxy reads nil as ready)."""
    out: dict[str, Any] = {"addresses": [ip]}
    if node is not None:
        out["nodeName"] = node
    if conditions:
        out["conditions"] = conditions
    return out


def port(name: str, number: int, protocol: str = "TCP", **extra: Any) -> dict[str, Any]:
    return {"name": name, "port": number, "protocol": protocol, **extra}


def service(*args: Any, **kwargs: Any) -> Service:
    return Service.from_dict(service_dict(*args, **kwargs))


def endpoint_slice(*args: Any, **kwargs: Any) -> EndpointSlice:
    return EndpointSlice.from_dict(slice_dict(*args, **kwargs))


def listed(proxier: P, objects: list[Service | EndpointSlice]) -> P:
    """`proxier` after its informers listed `objects` (each ADDED) and reported synced."""
    for obj in objects:
        if isinstance(obj, Service):
            proxier.on_service("ADDED", None, obj)
        else:
            proxier.on_slice("ADDED", None, obj)
    proxier.on_services_synced()
    proxier.on_slices_synced()
    return proxier
