"""The rules of one service port: the body of kube-proxy's per-service loop in syncProxyRules.

`service_fragment` renders everything one service port contributes to a payload (reference §6-§7),
split the way a partial sync needs it: the filter rules and the KUBE-SERVICES/KUBE-NODEPORTS jumps,
which every sync writes, and the service's own SVC/SVL/EXT/FW/SEP chains, which a partial sync
writes only when the Service or its EndpointSlices changed. It is pure.

`FragmentCache` remembers fragments between syncs. A fragment is reused only when its inputs (the
service port, its endpoints, the render context) are equal to the ones it was made from, so a
payload is the same text with or without the cache; the cache only saves the work. kube-proxy does
the equivalent work on every sync (it even computes the skipped chains to count their rules), which
is a good part of why its partial syncs take seconds at a few thousand Services.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from .hashing import endpoint_chain_name, service_chain_names
from .serviceports import EndpointInfo, IPAddress, ServicePortInfo, parse_cidr_sloppy, traffic_policy

KUBE_SERVICES = "KUBE-SERVICES"
KUBE_EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
KUBE_NODEPORTS = "KUBE-NODEPORTS"
KUBE_MARK_MASQ = "KUBE-MARK-MASQ"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
NFACCT_LOCALHOST_NODEPORTS = "localhost_nps_accepted_pkts"


@dataclass(frozen=True)
class RenderContext:
    """What a service port's rules depend on besides the port and its endpoints."""

    ipv6: bool
    masquerade_all: bool
    # ClusterCIDR local-traffic detector as (IfLocal, IfNotLocal) text, e.g. ("-s 10.0.0.0/8",
    # "! -s 10.0.0.0/8"); None is kube-proxy's no-op detector.
    detector: tuple[str, str] | None
    localhost_nodeports: bool
    nfacct: bool
    node_ip: IPAddress | None  # the primary node IP (LoadBalancerSourceRanges "allow from node")
    large_cluster: bool  # drop the per-endpoint comments (§7)


@dataclass(frozen=True)
class Fragment:
    """One service port's share of a payload, with the inputs it was rendered from."""

    sp: ServicePortInfo
    endpoints: tuple[EndpointInfo, ...]
    filter_rules: tuple[str, ...]
    nat_jumps: tuple[str, ...]  # KUBE-SERVICES / KUBE-NODEPORTS rules: written by every sync
    nat_chains: tuple[str, ...]  # `:CHAIN - [0:0]` of its SVC/SVL/EXT/FW/SEP chains
    nat_rules: tuple[str, ...]  # the rules of those chains
    active_chains: tuple[str, ...]
    no_local_internal: bool  # iTP Local with no local endpoint: DROP (a metric counts these)
    no_local_external: bool  # eTP Local with no local endpoint: DROP


def service_fragment(sp: ServicePortInfo, endpoints: tuple[EndpointInfo, ...], ctx: RenderContext) -> Fragment:
    """§6: the rules of one service port with these endpoints (sorted, as `build_endpoints_map`
    gives them). Pure."""
    policy = traffic_policy(endpoints, sp)
    has_endpoints, cluster, local = policy.endpoints.has_any, policy.endpoints.cluster, policy.endpoints.local
    s, p = sp.svc_port_name, sp.proto
    pm = f"-m {p} -p {p}"
    cip_dport = f"-d {sp.cluster_ip} --dport {sp.port}"
    chains = service_chain_names(s, p)
    filter_rules: list[str] = []
    nat_jumps: list[str] = []
    nat_chains: list[str] = []
    nat_rules: list[str] = []
    active: list[str] = []

    uses_cluster_chain, uses_local_chain = policy.uses_cluster_chain, policy.uses_local_chain
    internal_chain, has_internal = chains.svl if policy.internal_local else chains.svc, policy.has_internal
    external_policy_chain, has_external = chains.svl if policy.external_local else chains.svc, policy.has_external
    uses_ext = policy.uses_external_chain
    uses_fw = has_endpoints and bool(sp.load_balancer_vips) and bool(sp.load_balancer_source_ranges)
    lb_chain = chains.fw if uses_fw else chains.ext

    internal_target = internal_comment = external_target = external_comment = ""
    no_local_internal = no_local_external = False
    if not has_endpoints:
        internal_target = external_target = "REJECT"
        internal_comment = external_comment = f'"{s} has no endpoints"'
    else:
        if policy.no_local_internal:
            internal_target, internal_comment, no_local_internal = "DROP", f'"{s} has no local endpoints"', True
        if policy.no_local_external:
            external_target, external_comment, no_local_external = "DROP", f'"{s} has no local endpoints"', True

    # 1. cluster IP
    if has_internal:
        nat_jumps.append(f'-A {KUBE_SERVICES} -m comment --comment "{s} cluster IP" {pm} {cip_dport} '
                         f"-j {internal_chain}")
    else:
        filter_rules.append(f"-A {KUBE_SERVICES} -m comment --comment {internal_comment} {pm} {cip_dport} "
                            f"-j {internal_target}")
    # 2. external IPs
    for eip in sp.external_ips:
        if has_endpoints:
            nat_jumps.append(f'-A {KUBE_SERVICES} -m comment --comment "{s} external IP" {pm} -d {eip} '
                             f"--dport {sp.port} -j {chains.ext}")
        if not has_external:
            filter_rules.append(f"-A {KUBE_EXTERNAL_SERVICES} -m comment --comment {external_comment} {pm} "
                                f"-d {eip} --dport {sp.port} -j {external_target}")
    # 3. load-balancer VIPs
    for vip in sp.load_balancer_vips:
        if has_endpoints:
            nat_jumps.append(f'-A {KUBE_SERVICES} -m comment --comment "{s} loadbalancer IP" {pm} -d {vip} '
                             f"--dport {sp.port} -j {lb_chain}")
        if uses_fw:
            filter_rules.append(f'-A {KUBE_PROXY_FIREWALL} -m comment --comment "{s} traffic not accepted by '
                                f'{chains.fw}" {pm} -d {vip} --dport {sp.port} -j DROP')
    if not has_external:
        for vip in sp.load_balancer_vips:
            filter_rules.append(f"-A {KUBE_EXTERNAL_SERVICES} -m comment --comment {external_comment} {pm} "
                                f"-d {vip} --dport {sp.port} -j {external_target}")
    # 4. node port (NodePorts bypass loadBalancerSourceRanges: they go to EXT, never FW)
    if sp.node_port:
        if has_endpoints:
            if ctx.localhost_nodeports and not ctx.ipv6 and ctx.nfacct:
                nat_jumps.append(f"-A {KUBE_NODEPORTS} -m comment --comment {s} {pm} -d 127.0.0.0/8 "
                                 f"--dport {sp.node_port} -m nfacct --nfacct-name {NFACCT_LOCALHOST_NODEPORTS} "
                                 f"-j {chains.ext}")
            nat_jumps.append(f"-A {KUBE_NODEPORTS} -m comment --comment {s} {pm} --dport {sp.node_port} "
                             f"-j {chains.ext}")
        if not has_external:
            filter_rules.append(f"-A {KUBE_EXTERNAL_SERVICES} -m comment --comment {external_comment} "
                                f"-m addrtype --dst-type LOCAL {pm} --dport {sp.node_port} -j {external_target}")
    # 5. health check node port, open whether or not there are local endpoints
    if sp.health_check_node_port:
        filter_rules.append(f'-A {KUBE_NODEPORTS} -m comment --comment "{s} health check node port" '
                            f"-m tcp -p tcp --dport {sp.health_check_node_port} -j ACCEPT")

    # 6. From here on everything is skipped by a partial sync that did not touch this service.
    # 7. masquerade off-cluster traffic to the cluster IP (it may bounce off-node)
    if has_internal:
        masq = f'-A {internal_chain} -m comment --comment "{s} cluster IP" {pm} {cip_dport}'
        if ctx.masquerade_all:
            nat_rules.append(f"{masq} -j {KUBE_MARK_MASQ}")
        elif ctx.detector is not None:
            nat_rules.append(f"{masq} {ctx.detector[1]} -j {KUBE_MARK_MASQ}")
    # 8. external destinations
    if uses_ext:
        nat_chains.append(f":{chains.ext} - [0:0]")
        active.append(chains.ext)
        if not sp.external_policy_local:
            # Cluster policy may cross nodes: always masquerade.
            nat_rules.append(f'-A {chains.ext} -m comment --comment "masquerade traffic for {s} external '
                             f'destinations" -j {KUBE_MARK_MASQ}')
        else:
            if ctx.detector is not None:
                # Pod -> external IP short-circuits to all endpoints, unmasqueraded, as if it had gone
                # out to the load balancer and come back.
                nat_rules.append(f'-A {chains.ext} -m comment --comment "pod traffic for {s} external '
                                 f'destinations" {ctx.detector[0]} -j {chains.svc}')
            # Host-originated traffic still needs SNAT: its source is a local address.
            nat_rules.append(f'-A {chains.ext} -m comment --comment "masquerade LOCAL traffic for {s} external '
                             f'destinations" -m addrtype --src-type LOCAL -j {KUBE_MARK_MASQ}')
            nat_rules.append(f'-A {chains.ext} -m comment --comment "route LOCAL traffic for {s} external '
                             f'destinations" -m addrtype --src-type LOCAL -j {chains.svc}')
        if has_external:
            nat_rules.append(f"-A {chains.ext} -j {external_policy_chain}")
    # 9. loadBalancerSourceRanges firewall
    if uses_fw:
        nat_chains.append(f":{chains.fw} - [0:0]")
        active.append(chains.fw)
        fw = f'-A {chains.fw} -m comment --comment "{s} loadbalancer IP"'
        allow_from_node = False
        for cidr in sp.load_balancer_source_ranges:
            nat_rules.append(f"{fw} -s {cidr} -j {chains.ext}")
            net = parse_cidr_sloppy(cidr)
            node_ip = ctx.node_ip
            allow_from_node = allow_from_node or (node_ip is not None and net is not None
                                                  and node_ip.version == net.version and node_ip in net)
        if allow_from_node:
            # A VIP bound locally loops node->VIP traffic back with the VIP as source.
            for vip in sp.load_balancer_vips:
                nat_rules.append(f"{fw} -s {vip} -j {chains.ext}")
        nat_rules.append(f'-A {chains.fw} -m comment --comment "other traffic to {s} will be dropped by '
                         f'KUBE-PROXY-FIREWALL"')
    # 10. endpoint dispatch
    if uses_cluster_chain:
        nat_chains.append(f":{chains.svc} - [0:0]")
        active.append(chains.svc)
        _write_dispatch(nat_rules, sp, chains.svc, cluster, ctx.large_cluster)
    if uses_local_chain:
        nat_chains.append(f":{chains.svl} - [0:0]")
        active.append(chains.svl)
        _write_dispatch(nat_rules, sp, chains.svl, local, ctx.large_cluster)
    # 11. one chain per reachable endpoint
    affinity, large = sp.session_affinity_client_ip, ctx.large_cluster
    for ep in policy.endpoints.all_reachable:
        sep, declaration, hairpin, dnat = _endpoint_chain(s, p, ep.endpoint, ep.ip, affinity, large)
        nat_chains.append(declaration)
        active.append(sep)
        nat_rules += (hairpin, dnat)

    return Fragment(sp=sp, endpoints=endpoints, filter_rules=tuple(filter_rules), nat_jumps=tuple(nat_jumps),
                    nat_chains=tuple(nat_chains), nat_rules=tuple(nat_rules), active_chains=tuple(active),
                    no_local_internal=no_local_internal, no_local_external=no_local_external)


def _write_dispatch(rules: list[str], sp: ServicePortInfo, chain: str, endpoints: tuple[EndpointInfo, ...],
                    large_cluster: bool) -> None:
    """§7: SVC/SVL rules spreading connections over `endpoints` (writeServiceToEndpointRules)."""
    s, p, affinity = sp.svc_port_name, sp.proto, sp.session_affinity_client_ip
    seps = [_endpoint_chain(s, p, ep.endpoint, ep.ip, affinity, large_cluster)[0] for ep in endpoints]
    # appendServiceCommentLocked: the per-endpoint comments go in large-cluster mode.
    comments = ([""] * len(endpoints) if large_cluster
                else [f' -m comment --comment "{s} -> {ep.endpoint}"' for ep in endpoints])
    if affinity:
        # Sticky clients first: a recent match on the endpoint's own list wins.
        for comment, sep in zip(comments, seps, strict=True):
            rules.append(f"-A {chain}{comment} -m recent --name {sep} --rcheck "
                         f"--seconds {sp.sticky_max_age_seconds} --reap -j {sep}")
    n = len(endpoints)
    for i, (comment, sep) in enumerate(zip(comments, seps, strict=True)):
        stat = _probability(n - i) if i < n - 1 else ""
        rules.append(f"-A {chain}{comment}{stat} -j {sep}")


@functools.lru_cache(maxsize=1 << 12)
def _probability(left: int) -> str:
    """The statistic match of a dispatch rule with `left` endpoints still to choose from: it matches
    with probability 1/left of what is left, so every endpoint gets 1/n; e.g. n=3: 0.3333333333, then
    0.5000000000, then the last rule always matches (and has none). "%0.10f" formats exactly like
    Go's fmt.Sprintf("%0.10f"). Memoized: the same few values on every sync of every node."""
    return " -m statistic --mode random --probability %0.10f" % (1.0 / left)


# The per-endpoint text is the same on every sync and, in `kubelab up`, on every node: one SEP chain
# name (a SHA-256) and three lines per endpoint were half of a rollout's render. Bounded, so churn
# costs memory only up to this many endpoints.
_ENDPOINT_CACHE_SIZE = 1 << 16


@functools.lru_cache(maxsize=_ENDPOINT_CACHE_SIZE)
def _endpoint_chain(svc_port_name: str, proto: str, endpoint: str, ip: str, affinity: bool,
                    large_cluster: bool) -> tuple[str, str, str, str]:
    """§7, one endpoint's own chain: its name, its declaration, the hairpin rule (a pod reaching
    itself through the service must be SNATed) and the DNAT (remembering the client on the
    endpoint's `recent` list under ClientIP affinity). Pure."""
    sep = endpoint_chain_name(svc_port_name, proto, endpoint)
    comment = "" if large_cluster else f" -m comment --comment {svc_port_name}"
    recent = f" -m recent --name {sep} --set" if affinity else ""
    return (sep, f":{sep} - [0:0]", f"-A {sep}{comment} -s {ip} -j {KUBE_MARK_MASQ}",
            f"-A {sep}{comment}{recent} -m {proto} -p {proto} -j DNAT --to-destination {endpoint}")


class FragmentCache:
    """Fragments of the last render, reused while their inputs stay equal.

    Owned by one renderer (a proxy agent); the context is part of every hit, so switching context
    (say, into large-cluster mode) simply renders everything afresh. `retain` drops the fragments of
    service ports that are gone, so the cache never outgrows the cluster.
    """

    def __init__(self) -> None:
        self._context: RenderContext | None = None
        self._entries: dict[tuple[str, str], Fragment] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def begin(self, ctx: RenderContext) -> None:
        """Start a render in context `ctx`; another context than last time empties the cache."""
        if ctx != self._context:
            self._entries.clear()
            self._context = ctx

    def lookup(self, sp: ServicePortInfo, endpoints: tuple[EndpointInfo, ...]) -> Fragment | None:
        frag = self._entries.get((sp.svc_port_name, sp.proto))
        # Identity first: the agent hands in the very same objects while nothing changed.
        if frag is not None and (frag.sp is sp or frag.sp == sp) and (
                frag.endpoints is endpoints or frag.endpoints == endpoints):
            self.hits += 1
            return frag
        self.misses += 1
        return None

    def store(self, frag: Fragment) -> None:
        self._entries[(frag.sp.svc_port_name, frag.sp.proto)] = frag

    def retain(self, svc_ports: Sequence[ServicePortInfo]) -> None:
        """Forget the fragments of service ports that are not in `svc_ports` (all of which have
        just been looked up or stored, so a size match means nothing is stale)."""
        if len(self._entries) > len(svc_ports):
            keep = {(sp.svc_port_name, sp.proto) for sp in svc_ports}
            for key in self._entries.keys() - keep:
                del self._entries[key]
