"""kube-proxy's internal view of Services and EndpointSlices, and CategorizeEndpoints.

This mirrors what kube-proxy builds before it renders rules (pkg/proxy/serviceport.go,
pkg/proxy/endpointslicecache.go, pkg/proxy/topology.go, pkg/api/v1/service/util.go):

* one `ServicePortInfo` per entry of `spec.ports` of every proxied Service, for one IP family;
* one sorted tuple of `EndpointInfo` per (service, port name, protocol), collected from the
  EndpointSlices labelled `kubernetes.io/service-name`;
* `categorize_endpoints`, which picks the endpoints each traffic policy may use, and `traffic_policy`,
  the decisions both proxiers take from them (which policy chain ClusterIP and external traffic use, and
  whether either has an endpoint), so the iptables and nftables renderers cannot decide differently.

Everything here is pure: no clock, no subprocess, no I/O, no state but the memo of the IP parsers
(which changes their cost, never their answers). Inputs are never mutated. The per-slice step
(`slice_endpoints`) is separate from the merge (`merge_endpoints`) so that the agent can redo only
the slices that changed. Topology hints (trafficDistribution / zone hints) are not modelled: the cluster endpoint list is
never filtered by zone, as in kube-proxy when the node has no zone label.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kubelab import wellknown
from kubelab.models import EndpointSlice, Service, ServiceSpec

IPFamily = Literal["IPv4", "IPv6"]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Label selectors kube-proxy's informers use (cmd/kube-proxy/app/server.go): objects carrying
# either label are invisible to it.
LABEL_SERVICE_PROXY_NAME = wellknown.SERVICE_PROXY_NAME
LABEL_HEADLESS = wellknown.HEADLESS
LABEL_SERVICE_NAME = wellknown.SERVICE_NAME

DEFAULT_STICKY_SECONDS = 10800  # API default of sessionAffinityConfig.clientIP.timeoutSeconds

_DIGITS = re.compile(r"[0-9]+")


# --- sloppy IP parsing ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1 << 17)
def parse_ip_sloppy(text: str) -> IPAddress | None:
    """Parse an IP like k8s.io/utils/net.ParseIPSloppy: IPv4 octets may have leading zeros,
    read as decimal (upstream TestBadIPs: "172.30.0.041" is 172.30.0.41). None if invalid.

    Pure (and memoized: the same endpoint IPs come back on every sync)."""
    if "%" in text:  # Python's IPv6Address takes a zone ("fe80::1%eth0", a newline too); Go's parsers do not
        return None
    if ":" in text:
        try:
            v6 = ipaddress.IPv6Address(text)
        except ValueError:
            return None
        # Go treats IPv4-mapped IPv6 addresses as IPv4 (To4() != nil) and prints them dotted.
        return v6.ipv4_mapped or v6
    parts = text.split(".")
    if len(parts) != 4:
        return None
    value = 0
    for part in parts:
        if not _DIGITS.fullmatch(part):
            return None
        octet = int(part)
        if octet > 255:
            return None
        value = value << 8 | octet
    # Built from the integer: ipaddress's own octet parser is several times slower.
    return ipaddress.IPv4Address(value)


@functools.lru_cache(maxsize=1 << 17)
def canonical_ip(text: str) -> tuple[str, IPFamily] | None:
    """The canonical text of an IP parsed sloppily, and its family: "010.1.2.3" -> ("10.1.2.3",
    "IPv4"). None if invalid. Pure (memoized)."""
    ip = parse_ip_sloppy(text)
    if ip is None:
        return None
    if ip.version == 4 and ":" not in text:  # (an IPv4-mapped IPv6 address is IPv4 too)
        # str(IPv4Address) is slow; an address without leading zeros is already canonical.
        parts = text.split(".")
        canonical = text if all(len(p) == 1 or p[0] != "0" for p in parts) else ".".join(str(int(p)) for p in parts)
        return canonical, "IPv4"
    return str(ip), family_of(ip)


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

EndpointsKey = tuple[str, str, str, str]  # (namespace, service name, port name, API protocol)


@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint of one service port (proxy.BaseEndpointInfo)."""

    ip: str  # canonical text, no brackets
    port: int
    ready: bool  # conditions.ready nil or true
    serving: bool  # conditions.serving nil or true
    terminating: bool  # conditions.terminating non-nil and true
    is_local: bool  # nodeName equals this proxier's node name
    # net.JoinHostPort(ip, port): "10.0.0.1:80", "[fd00::1]:80". Computed once: it names the SEP
    # chain, sorts the endpoints and appears in several rules.
    endpoint: str = ""

    def __post_init__(self) -> None:
        if not self.endpoint:
            joined = f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"
            object.__setattr__(self, "endpoint", joined)


@functools.lru_cache(maxsize=1 << 16)
def endpoint_info(ip: str, port: int, ready: bool, serving: bool, terminating: bool, is_local: bool) -> EndpointInfo:
    """An EndpointInfo, shared: `kubelab up`'s agents all convert the same slices on every change, and
    one object per distinct endpoint makes that a lookup rather than a frozen dataclass's construction,
    and lets the fragment cache compare endpoints by identity. Bounded: only a memory/CPU trade."""
    return EndpointInfo(ip=ip, port=port, ready=ready, serving=serving, terminating=terminating, is_local=is_local)


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
    # Derived names, computed once (a sync reads them for every port): "ns/name", the
    # ServicePortName.String() "ns/name:port" (or "ns/name" for an unnamed port), the lower-case
    # protocol of rules and chain hashes, and the key of the port's endpoints.
    service_key: str = field(init=False, repr=False, compare=False)
    svc_port_name: str = field(init=False, repr=False, compare=False)
    proto: str = field(init=False, repr=False, compare=False)
    endpoints_key: EndpointsKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = f"{self.namespace}/{self.name}"
        object.__setattr__(self, "service_key", key)
        object.__setattr__(self, "svc_port_name", f"{key}:{self.port_name}" if self.port_name else key)
        object.__setattr__(self, "proto", self.protocol.lower())
        object.__setattr__(self, "endpoints_key", (self.namespace, self.name, self.port_name, self.protocol))

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


def endpoints_key(sp: ServicePortInfo) -> EndpointsKey:
    """The key under which `build_endpoints_map` files this port's endpoints."""
    return sp.endpoints_key


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
        ip = canonical_ip(text)
        if ip is not None and ip[1] == family:
            out.append(ip[0])
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

SliceEndpoints = tuple[tuple[EndpointsKey, tuple[EndpointInfo, ...]], ...]


def slice_endpoints(es: EndpointSlice, *, node_name: str, family: IPFamily = "IPv4") -> SliceEndpoints:
    """What one EndpointSlice contributes, per (service, port name, protocol) key, in the slice's
    order (EndpointSliceCache's endpointSliceInfo). Pure.

    Only addresses[0] of each endpoint counts; a slice of the other address type, ports with a nil
    name or a zero port, and empty address lists contribute nothing, nor do slices without the
    service-name label or with a label that hides them from kube-proxy's informers.
    """
    labels = es.labels
    service_name = labels.get(LABEL_SERVICE_NAME)
    if not es.namespace or not service_name or LABEL_SERVICE_PROXY_NAME in labels or LABEL_HEADLESS in labels:
        return ()
    # EndpointsChangeTracker drops slices whose addressType is not the proxier's family.
    if es.address_type is not None and es.address_type != family:
        return ()
    parsed = []
    for ep in es.endpoints or []:
        if not ep.addresses:
            continue
        ip = canonical_ip(ep.addresses[0])
        if ip is None or ip[1] != family:
            continue
        cond = ep.conditions
        parsed.append((ip[0], cond is None or cond.ready is None or cond.ready,
                       cond is None or cond.serving is None or cond.serving,
                       cond is not None and bool(cond.terminating),
                       bool(node_name) and ep.node_name == node_name))
    out = []
    for port in es.ports or []:
        if port.name is None or not port.port:
            continue
        number = port.port
        infos = tuple(endpoint_info(ip, number, ready, serving, terminating, is_local)
                      for ip, ready, serving, terminating, is_local in parsed)
        out.append(((es.namespace, service_name, port.name, port.protocol or "TCP"), infos))
    return tuple(out)


def merge_endpoints(contributions: Iterable[SliceEndpoints]) -> dict[EndpointsKey, tuple[EndpointInfo, ...]]:
    """endpointsMapFromEndpointInfo: the slices' contributions (in slice-name order) merged into one
    sorted tuple per key. Pure.

    One endpoint per distinct "ip:port", sorted by that string, so 10.1.1.11:11 sorts before
    10.1.1.1:11. The same ip:port twice (an endpoint moving between slices): the first copy
    stays, unless a later one is local (EndpointSliceCache.addEndpoints favours isLocal).
    """
    merged: dict[EndpointsKey, dict[str, EndpointInfo]] = {}
    for contribution in contributions:
        for key, infos in contribution:
            bucket = merged.setdefault(key, {})
            for info in infos:
                if info.endpoint not in bucket or info.is_local:
                    bucket[info.endpoint] = info
    return {key: tuple(sorted(bucket.values(), key=_endpoint_string))
            for key, bucket in merged.items() if bucket}


def _endpoint_string(info: EndpointInfo) -> str:
    return info.endpoint


def build_endpoints_map(
    slices: Iterable[EndpointSlice], *, node_name: str, family: IPFamily = "IPv4",
) -> dict[EndpointsKey, tuple[EndpointInfo, ...]]:
    """EndpointSliceCache.endpointInfoByServicePort + endpointsMapFromEndpointInfo. Pure.

    kube-proxy walks its slices in map order; they are taken by (namespace, name) here so that
    duplicates resolve the same way every time.
    """
    ordered = sorted(slices, key=lambda s: (s.namespace, s.name))
    return merge_endpoints(slice_endpoints(es, node_name=node_name, family=family) for es in ordered)


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


# --- The traffic-policy decision -----------------------------------------------------------------

@dataclass(frozen=True)
class TrafficPolicy:
    """Where one service port's traffic goes on this node, as both of kube-proxy's proxiers decide it right
    after CategorizeEndpoints in syncProxyRules (the same block in proxy/iptables and proxy/nftables):
    which policy chains are written, which one ClusterIP traffic and external traffic (NodePorts, external
    IPs, load-balancer IPs) use, and whether either has an endpoint to go to. Each proxier names the chains."""

    endpoints: CategorizedEndpoints
    uses_cluster_chain: bool  # usesClusterPolicyChain: Cluster policy is in use and has endpoints
    uses_local_chain: bool  # usesLocalPolicyChain: Local policy is in use and has endpoints
    internal_local: bool  # ClusterIP traffic goes to the Local policy chain (internalTrafficPolicy Local)
    external_local: bool  # external traffic's policy chain is the Local one (externalTrafficPolicy Local)
    has_internal: bool  # hasInternalEndpoints
    has_external: bool  # hasExternalEndpoints
    # The external chain is written whenever there are endpoints at all and the port is externally
    # accessible, even with no usable external endpoint: its short-circuits serve pod and host traffic.
    uses_external_chain: bool

    @property
    def no_local_internal(self) -> bool:
        """Endpoints exist, none local, under internalTrafficPolicy Local: ClusterIP traffic is dropped (kube
        counts it in sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"})."""
        return self.endpoints.has_any and not self.has_internal

    @property
    def no_local_external(self) -> bool:
        """The same for external traffic under externalTrafficPolicy Local."""
        return self.endpoints.has_any and not self.has_external


def traffic_policy(endpoints: Sequence[EndpointInfo], sp: ServicePortInfo) -> TrafficPolicy:
    """CategorizeEndpoints, then kube-proxy's policy-chain decisions for the port (TrafficPolicy). Pure."""
    cat = categorize_endpoints(endpoints, sp)
    has_internal = has_external = cat.has_any
    if sp.internal_policy_local:
        has_internal = has_internal and bool(cat.local)
    if sp.external_policy_local:
        has_external = has_external and bool(cat.local)
    return TrafficPolicy(cat, uses_cluster_chain=bool(cat.cluster) and sp.uses_cluster_endpoints,
                         uses_local_chain=bool(cat.local) and sp.uses_local_endpoints,
                         internal_local=sp.internal_policy_local, external_local=sp.external_policy_local,
                         has_internal=has_internal, has_external=has_external,
                         uses_external_chain=cat.has_any and sp.externally_accessible)
