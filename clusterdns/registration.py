"""The `kube-dns` Service in kube-system, and the Endpoints and EndpointSlice that point it at this server.

The Service has kubeadm's shape (name, labels, annotations, ports dns 53/UDP, dns-tcp 53/TCP, metrics
9153/TCP, ClusterIP 10.96.0.10) but no selector: no pod runs the DNS server, a lab component does, so
it writes its own Endpoints and EndpointSlice, as kube-apiserver does for the `kubernetes` Service.
kube-proxy then DNATs 10.96.0.10:53 to wherever the server listens. The shapes are pure; `ensure`
creates an object or puts it back to this shape.
"""

from __future__ import annotations

import logging
from typing import Any

from kubelab import kinds, wellknown
from kubelab.client import AlreadyExists, ApiClient
from kubelab.kinds import ResourceType

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
NAME = "kube-dns"
LABELS = {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}
ANNOTATIONS = {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}


def _ports(dns_port: int, metrics_port: int | None) -> list[tuple[str, int, str, int]]:
    """(name, service port, protocol, target port)."""
    ports = [("dns", 53, "UDP", dns_port), ("dns-tcp", 53, "TCP", dns_port)]
    if metrics_port is not None:
        ports.append(("metrics", 9153, "TCP", metrics_port))
    return ports


def service(cluster_ip: str, *, dns_port: int = 53, metrics_port: int | None = 9153) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS),
                         "annotations": dict(ANNOTATIONS)},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                     "sessionAffinity": "None",
                     "ports": [{"name": name, "port": port, "protocol": proto, "targetPort": target}
                               for name, port, proto, target in _ports(dns_port, metrics_port)]}}


def endpoints(ip: str, *, dns_port: int = 53, metrics_port: int | None = 9153) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                         "labels": {**LABELS, "endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}],
                         "ports": [{"name": name, "port": target, "protocol": proto}
                                   for name, _, proto, target in _ports(dns_port, metrics_port)]}]}


def endpoint_slice(ip: str, *, dns_port: int = 53, metrics_port: int | None = 9153) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                         "labels": {**LABELS, wellknown.SERVICE_NAME: NAME}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True, "serving": True,
                                                            "terminating": False}}],
            "ports": [{"name": name, "port": target, "protocol": proto}
                      for name, _, proto, target in _ports(dns_port, metrics_port)]}


def _differs(current: dict[str, Any], want: dict[str, Any]) -> bool:
    for key, value in want.items():
        if key == "metadata":
            meta = current.get("metadata") or {}
            if any(meta.get(k) != v for k, v in value.items() if k in ("labels", "annotations")):
                return True
        elif key == "spec":
            spec = current.get("spec") or {}
            if any(spec.get(k) != v for k, v in value.items() if k != "clusterIPs"):
                return True
        elif key not in ("apiVersion", "kind") and current.get(key) != value:
            return True
    return False


async def ensure(api: ApiClient, rt: ResourceType, body: dict[str, Any]) -> None:
    """Create `body`, or update the existing object where it differs (a restart on another address)."""
    meta = body["metadata"]
    try:
        await api.create(rt, body, meta["namespace"])
        log.info("created %s %s/%s", rt.kind, meta["namespace"], meta["name"])
        return
    except AlreadyExists:
        pass
    current = await api.request("GET", rt.path(meta["namespace"], meta["name"]))
    if not _differs(current, body):
        return
    if rt == kinds.SERVICES and (current.get("spec") or {}).get("clusterIP") != body["spec"]["clusterIP"]:
        log.warning("Service %s/%s has clusterIP %s, not %s; leaving it", NAMESPACE, NAME,
                    current["spec"].get("clusterIP"), body["spec"]["clusterIP"])
        return
    kept_meta = {k: v for k, v in meta.items() if k in ("labels", "annotations")}
    updated = {**current, **{k: v for k, v in body.items() if k != "metadata"},
               "metadata": {**current["metadata"], **kept_meta}}
    if rt == kinds.SERVICES:
        updated["spec"] = {**current.get("spec", {}), **body["spec"]}
    await api.request("PUT", rt.path(meta["namespace"], meta["name"]), body=updated)
    log.info("updated %s %s/%s", rt.kind, meta["namespace"], meta["name"])
