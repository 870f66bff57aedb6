"""kube-proxy's internal view of Services and EndpointSlices, and CategorizeEndpoints.

This mirrors what kube-proxy builds before it renders rules (pkg/proxy/serviceport.go,
pkg/proxy/endpointslicecache.go, pkg/proxy/topology.go, pkg/api/v1/service/util.go):

* one `ServicePortInfo` per entry of `spec.ports` of every proxied Service, for one IP family;
* one sorted tuple of `EndpointInfo` per (service, port name, protocol), collected from the
  EndpointSlices labelled `kubernetes.io/service-name`;
* `categorize_endpoints`, which picks the endpoints each traffic policy may use.

Everything here is pure: no clock, no subprocess, no globals, no I/O. Inputs are never mutated.
Topology hints (trafficDistribution / zone hints) are not modelled: the cluster endpoint list is
never filtered by zone, as in kube-proxy when the node has no zone label.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from kubelab.models import EndpointSlice, Service, ServiceSpec

IPFamily = Literal["IPv4", "IPv6"]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Label selectors kube-proxy's informers use (cmd/kube-proxy/app/server.go): objects carrying
# either label are invisible to it.
LABEL_SERVICE_PROXY_NAME = "service.kubernetes.io/service-proxy-name"
LABEL_HEADLESS = "service.kubernetes.io/headless"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"

DEFAULT_STICKY_SECONDS = 10800  # API default of sessionAffinityConfig.clientIP.timeoutSeconds

_DIGITS = re.compile(r"[0-9]+")


# --- sloppy IP parsing ---------------------------------------------------------------------------

def parse_ip_sloppy(text: str) -> IPAddress | None:
    """Parse an IP like k8s.io/utils/net.ParseIPSloppy: IPv4 octets may have leading zeros,
    read as decimal (upstream TestBadIPs: "172.30.0.041" is 172.30.0.41). None if invalid."""
    if ":" in text:
        try:
            v6 = ipaddress.IPv6Address(text)
        except ValueError:
            return None
        # Go treats IPv4-mapped IPv6 addresses as IPv4 (To4() != nil) and prints them dotted.
        return v6.ipv4_mapped or v6
    parts = text.split(".")
    if len(parts) != 4 or not all(_DIGITS.fullmatch(p) for p in parts):
        return None
    octets = [int(p) for p in parts]
    if any(o > 255 for o in octets):
        return None
    return ipaddress.IPv4Address(".".join(str(o) for o in octets))


def parse_cidr_sloppy(text: str) -> IPNetwork | None:
    """Parse a CIDR like ParseCIDRSloppy and mask it: "203.0.113.000/025" -> 203.0.113.0/25."""
    addr, sep, bits = text.partition("/")
    if not sep or not _DIGITS.fullmatch(bits):
        return None
    ip = parse_ip_sloppy(addr)
    if ip is None or int(bits) > ip.max_prefixlen:
        return None
    return ipaddress.ip_network(f"{ip}/{int(bits)}", strict=False)


def family_of(ip: IPAddress | IPNetwork) -> IPFamily:
    return "IPv4" if ip.version == 4 else "IPv6"


# --- the model -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint of one service port (proxy.BaseEndpointInfo)."""

    ip: str  # canonical text, no brackets
    port: int
    ready: bool  # conditions.ready nil or true
    serving: bool  # conditions.serving nil or true
    terminating: bool  # conditions.terminating non-nil and true
    is_local: bool  # nodeName equals this proxier's node name

    @property
    def endpoint(self) -> str:
        """net.JoinHostPort(ip, port): "10.0.0.1:80", "[fd00::1]:80"."""
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


@dataclass(frozen=True)
class ServicePortInfo:
    """One service port as kube-proxy sees it (proxy.BaseServicePortInfo), for one IP family."""

    namespace: str
    name: str
    port_name: str
    protocol: str  # as in the API: "TCP", "UDP", "SCTP"
    cluster_ip: str
    port: int
    node_port: int = 0
    external_ips: tuple[str, ...] = ()
    load_balancer_vips: tuple[str, ...] = ()
    load_balancer_source_ranges: tuple[str, ...] = ()
    session_affinity_client_ip: bool = False
    sticky_max_age_seconds: int = 0
    external_policy_local: bool = False
    internal_policy_local: bool = False
    health_check_node_port: int = 0

    @property
    def service_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def svc_port_name(self) -> str:
        """ServicePortName.String(): "ns/name:port", or "ns/name" for an unnamed port."""
        return f"{self.service_key}:{self.port_name}" if self.port_name else self.service_key

    @property
    def proto(self) -> str:
        """The lower-case protocol used in rules (`-m tcp -p tcp`) and in chain hashes."""
        return self.protocol.lower()

    @property
    def externally_accessible(self) -> bool:
        return self.node_port != 0 or bool(self.load_balancer_vips) or bool(self.external_ips)

    @property
    def uses_cluster_endpoints(self) -> bool:
        # Even with eTP Local, an externally accessible port needs the cluster endpoints for the
        # EXT chain's short-circuit of pod/host-originated traffic.
        return not self.internal_policy_local or self.externally_accessible

    @property
    def uses_local_endpoints(self) -> bool:
        return self.internal_policy_local or (self.external_policy_local and self.externally_accessible)


EndpointsKey = tuple[str, str, str, str]  # (namespace, service name, port name, API protocol)


def endpoints_key(sp: ServicePortInfo) -> EndpointsKey:
    """The key under which `build_endpoints_map` files this port's endpoints."""
    return (sp.namespace, sp.name, sp.port_name, sp.protocol)


# --- Services ------------------------------------------------------------------------------------

def _cluster_ip_for_family(spec: ServiceSpec, family: IPFamily) -> str:
    """proxyutil.GetClusterIPByFamily."""
    if not spec.ip_families:
        ip = spec.cluster_ip or ""
        if ip in ("", "None"):
            return ""
        parsed = parse_ip_sloppy(ip)
        is_v6 = parsed is not None and parsed.version == 6
        return ip if is_v6 == (family == "IPv6") else ""
    for idx, fam in enumerate(spec.ip_families):
        if fam == family and idx < len(spec.cluster_ips or []):
            return (spec.cluster_ips or [])[idx]
    return ""


def _ips_of_family(texts: Iterable[str], family: IPFamily) -> tuple[str, ...]:
    out = []
    for text in texts:
        ip = parse_ip_sloppy(text)
        if ip is not None and family_of(ip) == family:
            out.append(str(ip))
    return tuple(out)


def service_ports(service: Service, family: IPFamily = "IPv4") -> tuple[ServicePortInfo, ...]:
    """The service ports kube-proxy would program for `service` (serviceToServiceMap), or ()
    when it skips the Service: headless, ExternalName, no cluster IP of this family, or one of
    the informer-excluded labels. Pure."""
    spec = service.spec
    labels = service.labels
    if spec is None or LABEL_SERVICE_PROXY_NAME in labels or LABEL_HEADLESS in labels:
        return ()
    svc_type = spec.type or "ClusterIP"
    if spec.cluster_ip in (None, "", "None") or svc_type == "ExternalName":
        return ()
    cluster_ip = parse_ip_sloppy(_cluster_ip_for_family(spec, family))
    if cluster_ip is None:
        return ()

    # pkg/api/v1/service/util.go: ExternallyAccessible / ExternalPolicyLocal / NeedsHealthCheck.
    externally_accessible = svc_type in ("LoadBalancer", "NodePort") or (
        svc_type == "ClusterIP" and bool(spec.external_ips))
    external_local = externally_accessible and spec.external_traffic_policy == "Local"
    internal_local = spec.internal_traffic_policy == "Local"
    hc_port = (spec.health_check_node_port or 0) if (svc_type == "LoadBalancer" and external_local) else 0

    client_ip = spec.session_affinity == "ClientIP"
    sticky = 0
    if client_ip:
        cfg = spec.session_affinity_config
        timeout = cfg.client_ip.timeout_seconds if cfg and cfg.client_ip else None
        sticky = DEFAULT_STICKY_SECONDS if timeout is None else timeout

    # Source ranges: validation lets whitespace through, so kube-proxy trims; a zero-length
    # prefix ("0.0.0.0/0") means "allow all", the same as no ranges at all.
    ranges: list[str] = []
    for raw in spec.load_balancer_source_ranges or []:
        net = parse_cidr_sloppy(raw.strip())
        if net is not None and family_of(net) == family:
            ranges.append(str(net))
    if any(r.endswith("/0") for r in ranges):
        ranges = []

    # LB ingress: only VIP-mode entries (ipMode unset or "VIP") with an IP of this family.
    ingress = service.status.load_balancer.ingress if (
        service.status and service.status.load_balancer) else None
    vip_texts = [ing.ip for ing in ingress or [] if ing.ip and ing.ip_mode in (None, "", "VIP")]

    return tuple(
        ServicePortInfo(
            namespace=service.namespace,
            name=service.name,
            port_name=p.name or "",
            protocol=p.protocol or "TCP",
            cluster_ip=str(cluster_ip),
            port=p.port or 0,
            node_port=p.node_port or 0,
            external_ips=_ips_of_family(spec.external_ips or [], family),
            load_balancer_vips=_ips_of_family(vip_texts, family),
            load_balancer_source_ranges=tuple(ranges),
            session_affinity_client_ip=client_ip,
            sticky_max_age_seconds=sticky,
            external_policy_local=external_local,
            internal_policy_local=internal_local,
            health_check_node_port=hc_port,
        )
        for p in spec.ports or []
    )


def build_service_ports(services: Iterable[Service], family: IPFamily = "IPv4") -> list[ServicePortInfo]:
    """All proxied service ports, sorted by (svcPortName, protocol) so that rendering is
    deterministic (kube-proxy walks a Go map, in random order). Pure."""
    ports = [sp for svc in services for sp in service_ports(svc, family)]
    return sorted(ports, key=lambda sp: (sp.svc_port_name, sp.proto))


# --- EndpointSlices ------------------------------------------------------------------------------

def build_endpoints_map(
    slices: Iterable[EndpointSlice], *, node_name: str, family: IPFamily = "IPv4",
) -> dict[EndpointsKey, tuple[EndpointInfo, ...]]:
    """EndpointSliceCache.endpointInfoByServicePort + endpointsMapFromEndpointInfo. Pure.

    Per (service, port name, protocol): one endpoint per distinct "ip:port", from addresses[0]
    only, sorted by that string — so 10.1.1.11:11 sorts before 10.1.1.1:11. Slices of the other
    address type, ports with a nil name or a zero port, and empty address lists are ignored.
    """
    merged: dict[EndpointsKey, dict[str, EndpointInfo]] = {}
    usable = [s for s in slices if s.namespace and s.labels.get(LABEL_SERVICE_NAME)
              and LABEL_SERVICE_PROXY_NAME not in s.labels and LABEL_HEADLESS not in s.labels]
    # kube-proxy walks its slices in map order; sort by name so duplicates resolve the same way
    # every time.
    for es in sorted(usable, key=lambda s: (s.namespace, s.name)):
        # EndpointsChangeTracker drops slices whose addressType is not the proxier's family.
        if es.address_type is not None and es.address_type != family:
            continue
        service_name = es.labels[LABEL_SERVICE_NAME]
        for port in es.ports or []:
            if port.name is None or not port.port:
                continue
            key = (es.namespace, service_name, port.name, port.protocol or "TCP")
            bucket = merged.setdefault(key, {})
            for ep in es.endpoints or []:
                if not ep.addresses:
                    continue
                ip = parse_ip_sloppy(ep.addresses[0])
                if ip is None or family_of(ip) != family:
                    continue
                cond = ep.conditions
                info = EndpointInfo(
                    ip=str(ip),
                    port=port.port,
                    ready=cond is None or cond.ready is None or cond.ready,
                    serving=cond is None or cond.serving is None or cond.serving,
                    terminating=cond is not None and bool(cond.terminating),
                    is_local=bool(node_name) and ep.node_name == node_name,
                )
                # The same ip:port in two slices (an endpoint moving between slices, or an IP
                # reused by a new pod): a non-terminating copy wins.
                if info.endpoint not in bucket or not info.terminating:
                    bucket[info.endpoint] = info
    return {key: tuple(sorted(bucket.values(), key=lambda e: e.endpoint))
            for key, bucket in merged.items() if bucket}


# --- CategorizeEndpoints -------------------------------------------------------------------------

@dataclass(frozen=True)
class CategorizedEndpoints:
    cluster: tuple[EndpointInfo, ...]  # usable under Cluster policy (empty if never used)
    local: tuple[EndpointInfo, ...]  # usable under Local policy (empty if never used)
    all_reachable: tuple[EndpointInfo, ...]  # every endpoint this node may DNAT to (SEP chains)
    has_any: bool  # some endpoint anywhere is usable, even if none is reachable from here


def categorize_endpoints(endpoints: Sequence[EndpointInfo], sp: ServicePortInfo) -> CategorizedEndpoints:
    """proxy.CategorizeEndpoints without topology hints. Pure.

    "Usable" means ready; if there are none, serving-and-terminating endpoints are used instead
    (independently for the cluster and the local list).
    """
    cluster: tuple[EndpointInfo, ...] = ()
    local: tuple[EndpointInfo, ...] = ()
    has_any = False
    if sp.uses_cluster_endpoints:
        cluster = tuple(e for e in endpoints if e.ready)
        if not cluster:
            cluster = tuple(e for e in endpoints if e.serving and e.terminating)
        has_any = bool(cluster)
    if not sp.uses_local_endpoints:
        return CategorizedEndpoints(cluster, local, cluster, has_any)

    has_local_ready = has_local_terminating = False
    for e in endpoints:
        if e.ready:
            has_any = True
            has_local_ready = has_local_ready or e.is_local
        elif e.serving and e.terminating:
            has_any = True
            has_local_terminating = has_local_terminating or e.is_local
    use_terminating = False
    if has_local_ready:
        local = tuple(e for e in endpoints if e.is_local and e.ready)
    elif has_local_terminating:
        use_terminating = True
        local = tuple(e for e in endpoints if e.is_local and e.serving and e.terminating)

    if not sp.uses_cluster_endpoints:
        return CategorizedEndpoints(cluster, local, local, has_any)
    if not use_terminating:
        # local holds only ready endpoints and cluster holds every ready one: a superset.
        return CategorizedEndpoints(cluster, local, cluster, has_any)
    # Terminating local endpoints are not in the cluster list: take the union. (kube-proxy
    # builds it from a map, in random order; sort for determinism.)
    union = {e.endpoint: e for e in (*cluster, *local)}
    reachable = tuple(sorted(union.values(), key=lambda e: e.endpoint))
    return CategorizedEndpoints(cluster, local, reachable, has_any)
