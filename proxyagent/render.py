"""Render Services + EndpointSlices into the iptables-restore payload of kube-proxy's iptables mode.

A rule-for-rule rendering of `syncProxyRules` in pkg/proxy/iptables/proxier.go (the behaviour is
described in reference/kube-proxy-iptables.md; section numbers below refer to it). `render` is
pure: no clock, no subprocess, no globals, no I/O. Everything that kube-proxy learns from the
machine (does iptables support --random-fully, do nfacct counters exist, what chains are in the
kernel now, is this a full or a partial sync) comes in as arguments, so the I/O layer decides and
this module only computes text.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from kubelab.models import EndpointSlice, Service

from .hashing import endpoint_chain_name, is_service_chain, service_chain_names
from .serviceports import (
    EndpointInfo,
    IPAddress,
    IPFamily,
    IPNetwork,
    ServicePortInfo,
    build_endpoints_map,
    build_service_ports,
    categorize_endpoints,
    endpoints_key,
    family_of,
    parse_cidr_sloppy,
    parse_ip_sloppy,
)

KUBE_SERVICES = "KUBE-SERVICES"
KUBE_EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
KUBE_NODEPORTS = "KUBE-NODEPORTS"
KUBE_POSTROUTING = "KUBE-POSTROUTING"
KUBE_MARK_MASQ = "KUBE-MARK-MASQ"
KUBE_FORWARD = "KUBE-FORWARD"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
KUBE_FIREWALL = "KUBE-FIREWALL"

# Above this many endpoints (summed over all service ports) kube-proxy drops the per-endpoint
# comments, which shrinks the payload by 40%+ (largeClusterEndpointsThreshold).
LARGE_CLUSTER_ENDPOINTS_THRESHOLD = 1000

NFACCT_INVALID_DROPPED = "ct_state_invalid_dropped_pkts"
NFACCT_LOCALHOST_NODEPORTS = "localhost_nps_accepted_pkts"

_LAST_RULE_COMMENT = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'


@dataclass(frozen=True)
class ProxyConfig:
    """What kube-proxy knows about its node and flags. `ip_family` selects the proxier (one per
    family on a dual-stack node)."""

    node_name: str = ""
    node_ips: tuple[str, ...] = ()  # used for LB source-range node-IP rule, nodeport-addresses
    cluster_cidr: str | None = None  # ClusterCIDR local detector; None => no-op detector
    masquerade_all: bool = False
    masquerade_bit: int = 14
    random_fully: bool = True  # append --random-fully to MASQUERADE
    localhost_nodeports: bool = True
    nfacct: bool = False  # emit the nfacct match parts
    conntrack_tcp_be_liberal: bool = False  # omit the INVALID drop rule when True
    nodeport_addresses: tuple[str, ...] = ()  # empty = all local addresses
    ip_family: IPFamily = "IPv4"


@dataclass(frozen=True)
class JumpRule:
    """A jump from a built-in chain into kube-proxy's chains (§3). Not part of the payload: on
    every full sync the I/O layer runs `iptables -N dst` and `-C`/`-I src 1 <args>` for each."""

    table: str
    src_chain: str
    dst_chain: str
    extra_args: tuple[str, ...]
    comment: str

    def args(self) -> tuple[str, ...]:
        """Rule arguments as argv elements (the comment is one element, unquoted)."""
        comment = ("-m", "comment", "--comment", self.comment) if self.comment else ()
        return (*self.extra_args, *comment, "-j", self.dst_chain)


_CT_NEW = ("-m", "conntrack", "--ctstate", "NEW")

# iptablesJumpChains followed by iptablesKubeletJumpChains, in kube-proxy's order. Each is
# prepended, so a fresh FORWARD ends up KUBE-PROXY-FIREWALL, KUBE-FORWARD, KUBE-SERVICES,
# KUBE-EXTERNAL-SERVICES.
JUMP_RULES: tuple[JumpRule, ...] = (
    JumpRule("filter", "INPUT", KUBE_EXTERNAL_SERVICES, _CT_NEW, "kubernetes externally-visible service portals"),
    JumpRule("filter", "FORWARD", KUBE_EXTERNAL_SERVICES, _CT_NEW, "kubernetes externally-visible service portals"),
    JumpRule("filter", "INPUT", KUBE_NODEPORTS, (), "kubernetes health check service ports"),
    JumpRule("filter", "FORWARD", KUBE_SERVICES, _CT_NEW, "kubernetes service portals"),
    JumpRule("filter", "OUTPUT", KUBE_SERVICES, _CT_NEW, "kubernetes service portals"),
    JumpRule("filter", "FORWARD", KUBE_FORWARD, (), "kubernetes forwarding rules"),
    JumpRule("filter", "INPUT", KUBE_PROXY_FIREWALL, _CT_NEW, "kubernetes load balancer firewall"),
    JumpRule("filter", "OUTPUT", KUBE_PROXY_FIREWALL, _CT_NEW, "kubernetes load balancer firewall"),
    JumpRule("filter", "FORWARD", KUBE_PROXY_FIREWALL, _CT_NEW, "kubernetes load balancer firewall"),
    JumpRule("nat", "OUTPUT", KUBE_SERVICES, (), "kubernetes service portals"),
    JumpRule("nat", "PREROUTING", KUBE_SERVICES, (), "kubernetes service portals"),
    JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, (), "kubernetes postrouting rules"),
    JumpRule("filter", "INPUT", KUBE_FIREWALL, (), ""),
    JumpRule("filter", "OUTPUT", KUBE_FIREWALL, (), ""),
)


@dataclass(frozen=True)
class Ruleset:
    """The payload of one sync plus the numbers kube-proxy turns into metrics."""

    text: str  # `*filter ... COMMIT *nat ... COMMIT`, raw emission order, trailing newline
    active_nat_chains: frozenset[str]  # every service chain that exists after this sync
    filter_rules: int  # `-A` lines written to filter (sync_proxy_rules_iptables_last{filter})
    nat_rules: int  # `-A` lines written to nat (sync_proxy_rules_iptables_last{nat})
    nat_rules_skipped: int  # nat rules of unchanged services left in place by a partial sync
    deleted_chains: int  # stale service chains flushed and deleted (`-X`)
    full_sync: bool
    service_ports: int  # service ports programmed
    services_written: int  # service ports whose SVC/SVL/EXT/FW/SEP chains were written
    endpoints_total: int  # endpoints over all service ports (drives large-cluster mode)
    large_cluster_mode: bool
    no_local_endpoints_internal: int  # sync_proxy_rules_no_local_endpoints_total{internal}
    no_local_endpoints_external: int  # sync_proxy_rules_no_local_endpoints_total{external}
    health_check_node_ports: tuple[tuple[str, int], ...]  # ("ns/name", port), sorted

    @property
    def nat_rules_total(self) -> int:
        """sync_proxy_rules_iptables_total{nat}: rules kube-proxy owns in nat after the sync."""
        return self.nat_rules + self.nat_rules_skipped


def _q(text: str) -> str:
    # Comments with spaces are written with literal double quotes; iptables-restore's tokenizer
    # strips them (a bare svcPortName is written without quotes).
    return f'"{text}"'


def _rule(*parts: str | tuple[str, ...]) -> str:
    tokens: list[str] = []
    for part in parts:
        tokens.extend((part,) if isinstance(part, str) else part)
    return " ".join(tokens)


def _chain_line(chain: str) -> str:
    return f":{chain} - [0:0]"


class _Lines:
    """A line buffer that only counts when discarding (proxyutil.NewDiscardLineBuffer)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.lines: list[str] = []
        self.count = 0

    def write(self, line: str) -> None:
        self.count += 1
        if self.keep:
            self.lines.append(line)


def _nodeport_cidrs(config: ProxyConfig) -> list[IPNetwork]:
    """NewNodePortAddresses: --nodeport-addresses filtered to this family ("primary" = the node
    IP); an empty result means "match every local address", like kube-proxy's 0.0.0.0/0."""
    cidrs = []
    for text in config.nodeport_addresses:
        if text == "primary":
            ip = _primary_node_ip(config)
            net = parse_cidr_sloppy(f"{ip}/{ip.max_prefixlen}") if ip else None
        else:
            net = parse_cidr_sloppy(text)
        if net is not None and family_of(net) == config.ip_family:
            cidrs.append(net)
    return [] if any(net.prefixlen == 0 for net in cidrs) else cidrs


def _nodeport_ips(config: ProxyConfig, cidrs: list[IPNetwork], localhost_nodeports: bool) -> list[str]:
    """The node addresses the CIDRs select (GetNodeIPs); loopback is an address of every host.
    kube-proxy walks a map here; sort for determinism."""
    family = config.ip_family
    texts = (*config.node_ips, "127.0.0.1" if family == "IPv4" else "::1")
    parsed = (parse_ip_sloppy(t) for t in texts)
    candidates = {ip for ip in parsed if ip is not None and family_of(ip) == family}
    matched = sorted((ip for ip in candidates if any(ip in net for net in cidrs)), key=lambda ip: ip.packed)
    # Localhost NodePorts never work on IPv6 and are off on IPv4 without localhostNodePorts.
    skip_loopback = family == "IPv6" or not localhost_nodeports
    return [str(ip) for ip in matched if not (ip.is_loopback and skip_loopback)]


def _primary_node_ip(config: ProxyConfig) -> IPAddress | None:
    for text in config.node_ips:
        ip = parse_ip_sloppy(text)
        if ip is not None and family_of(ip) == config.ip_family:
            return ip
    return None


def _contains_ipv4_loopback(cidrs: list[IPNetwork]) -> bool:
    """NodePortAddresses.ContainsIPv4Loopback; no CIDRs means 0.0.0.0/0, which contains it."""
    loopback = ipaddress.IPv4Address("127.0.0.0")
    return not cidrs or any(
        n.version == 4 and (n.network_address.is_loopback or loopback in n) for n in cidrs)


def _local_detector(config: ProxyConfig) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The ClusterCIDR local-traffic detector: (IfLocal, IfNotLocal) args, or None for no-op."""
    if not config.cluster_cidr:
        return None
    net = parse_cidr_sloppy(config.cluster_cidr)
    if net is None or family_of(net) != config.ip_family:
        return None
    return ("-s", config.cluster_cidr), ("!", "-s", config.cluster_cidr)


def render(
    services: Iterable[Service],
    slices: Iterable[EndpointSlice],
    config: ProxyConfig,
    *,
    changed: AbstractSet[str] | None = None,
    existing_nat_chains: frozenset[str] = frozenset(),
) -> Ruleset:
    """The iptables-restore payload kube-proxy writes for these objects (syncProxyRules). Pure.

    `changed=None` is a full sync. A set of "namespace/name" keys is a partial sync (§11): the
    SVC/SVL/EXT/FW/SEP chains of other services are computed (they stay active) but not written,
    since `--noflush` leaves them in place; KUBE-SERVICES, KUBE-NODEPORTS and the filter table are
    always written whole. Every chain of `existing_nat_chains` (the kernel's nat chains, from
    iptables-save) that has a service prefix and is no longer active gets flushed and deleted;
    in large-cluster mode kube-proxy does that at most once per syncPeriod, so the caller passes
    an empty set in between.
    """
    family = config.ip_family
    ipv6 = family == "IPv6"
    mark = "0x%08x" % (1 << config.masquerade_bit)  # Go's "%#08x": 0x00004000 for bit 14
    # NewProxier turns localhostNodePorts off unless --nodeport-addresses admits 127.0.0.0/8;
    # the IPv6 proxier always runs without it.
    nodeport_cidrs = _nodeport_cidrs(config)
    localhost_nodeports = config.localhost_nodeports and not ipv6 and _contains_ipv4_loopback(nodeport_cidrs)
    detector = _local_detector(config)
    node_ip = _primary_node_ip(config)

    svc_ports = build_service_ports(services, family)
    endpoints_map = build_endpoints_map(slices, node_name=config.node_name, family=family)
    endpoints_total = sum(len(endpoints_map.get(endpoints_key(sp), ())) for sp in svc_ports)
    large_cluster = endpoints_total > LARGE_CLUSTER_ENDPOINTS_THRESHOLD

    def service_comment(text: str) -> tuple[str, ...]:
        # appendServiceCommentLocked: the per-endpoint comments go in large-cluster mode.
        return () if large_cluster else ("-m", "comment", "--comment", text)

    filter_chains = [_chain_line(c) for c in (
        KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL)]
    nat_chains_all = _Lines()
    for chain in (KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ):
        nat_chains_all.write(_chain_line(chain))
    filter_rules = _Lines()
    nat_rules_all = _Lines()
    skipped_chains, skipped_rules = _Lines(keep=False), _Lines(keep=False)

    # §5 static rules.
    nat_rules_all.write(_rule("-A", KUBE_POSTROUTING, "-m", "mark", "!", "--mark", f"{mark}/{mark}",
                              "-j", "RETURN"))
    # Clear the mark so a packet that re-traverses the stack is not masqueraded twice.
    nat_rules_all.write(_rule("-A", KUBE_POSTROUTING, "-j", "MARK", "--xor-mark", mark))
    nat_rules_all.write(_rule("-A", KUBE_POSTROUTING, "-m", "comment", "--comment",
                              _q("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE",
                              ("--random-fully",) if config.random_fully else ()))
    nat_rules_all.write(_rule("-A", KUBE_MARK_MASQ, "-j", "MARK", "--or-mark", mark))
    if not ipv6 and localhost_nodeports:
        # route_localnet=1 opens a hole (issue 90259) this anti-martian rule closes.
        filter_chains.append(_chain_line(KUBE_FIREWALL))
        filter_rules.write(_rule("-A", KUBE_FIREWALL, "-m", "comment", "--comment",
                                 _q("block incoming localnet connections"), "-d", "127.0.0.0/8",
                                 "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate",
                                 "RELATED,ESTABLISHED,DNAT", "-j", "DROP"))

    active: set[str] = set()
    no_local_internal = no_local_external = services_written = 0

    for sp in svc_ports:
        s, p = sp.svc_port_name, sp.proto
        pm = ("-m", p, "-p", p)
        dport = ("--dport", str(sp.port))
        chains = service_chain_names(s, p)
        cat = categorize_endpoints(endpoints_map.get(endpoints_key(sp), ()), sp)
        has_endpoints = cat.has_any

        uses_cluster_chain = bool(cat.cluster) and sp.uses_cluster_endpoints
        uses_local_chain = bool(cat.local) and sp.uses_local_endpoints
        internal_chain, has_internal = chains.svc, has_endpoints
        if sp.internal_policy_local:
            internal_chain, has_internal = chains.svl, has_internal and bool(cat.local)
        external_policy_chain, has_external = chains.svc, has_endpoints
        if sp.external_policy_local:
            external_policy_chain, has_external = chains.svl, has_external and bool(cat.local)
        # EXT is needed whenever there are endpoints at all: its short-circuit rules serve pod
        # and host traffic even when no endpoint is local.
        uses_ext = has_endpoints and sp.externally_accessible
        uses_fw = has_endpoints and bool(sp.load_balancer_vips) and bool(sp.load_balancer_source_ranges)
        lb_chain = chains.fw if uses_fw else chains.ext

        internal_target = internal_comment = external_target = external_comment = ""
        if not has_endpoints:
            internal_target = external_target = "REJECT"
            internal_comment = external_comment = _q(f"{s} has no endpoints")
        else:
            if not has_internal:
                internal_target, internal_comment = "DROP", _q(f"{s} has no local endpoints")
                no_local_internal += 1
            if not has_external:
                external_target, external_comment = "DROP", _q(f"{s} has no local endpoints")
                no_local_external += 1

        nat_chains, nat_rules = nat_chains_all, nat_rules_all

        # 1. cluster IP
        if has_internal:
            nat_rules.write(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment", _q(f"{s} cluster IP"),
                                  pm, "-d", sp.cluster_ip, dport, "-j", internal_chain))
        else:
            filter_rules.write(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment", internal_comment,
                                     pm, "-d", sp.cluster_ip, dport, "-j", internal_target))
        # 2. external IPs
        for eip in sp.external_ips:
            if has_endpoints:
                nat_rules.write(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment",
                                      _q(f"{s} external IP"),
                                      pm, "-d", eip, dport, "-j", chains.ext))
            if not has_external:
                filter_rules.write(_rule("-A", KUBE_EXTERNAL_SERVICES, "-m", "comment", "--comment",
                                         external_comment, pm, "-d", eip, dport, "-j", external_target))
        # 3. load-balancer VIPs
        for vip in sp.load_balancer_vips:
            if has_endpoints:
                nat_rules.write(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment",
                                      _q(f"{s} loadbalancer IP"), pm, "-d", vip, dport, "-j", lb_chain))
            if uses_fw:
                filter_rules.write(_rule("-A", KUBE_PROXY_FIREWALL, "-m", "comment", "--comment",
                                         _q(f"{s} traffic not accepted by {chains.fw}"), pm, "-d", vip, dport,
                                         "-j", "DROP"))
        if not has_external:
            for vip in sp.load_balancer_vips:
                filter_rules.write(_rule("-A", KUBE_EXTERNAL_SERVICES, "-m", "comment", "--comment",
                                         external_comment, pm, "-d", vip, dport, "-j", external_target))
        # 4. node port (NodePorts bypass loadBalancerSourceRanges: they go to EXT, never FW)
        if sp.node_port:
            nport = ("--dport", str(sp.node_port))
            if has_endpoints:
                if localhost_nodeports and not ipv6 and config.nfacct:
                    nat_rules.write(_rule("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", s, pm,
                                          "-d", "127.0.0.0/8", nport, "-m", "nfacct", "--nfacct-name",
                                          NFACCT_LOCALHOST_NODEPORTS, "-j", chains.ext))
                nat_rules.write(_rule("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", s, pm, nport,
                                      "-j", chains.ext))
            if not has_external:
                filter_rules.write(_rule("-A", KUBE_EXTERNAL_SERVICES, "-m", "comment", "--comment",
                                         external_comment, "-m", "addrtype", "--dst-type", "LOCAL", pm, nport,
                                         "-j", external_target))
        # 5. health check node port, open whether or not there are local endpoints
        if sp.health_check_node_port:
            filter_rules.write(_rule("-A", KUBE_NODEPORTS, "-m", "comment", "--comment",
                                     _q(f"{s} health check node port"), "-m", "tcp", "-p", "tcp",
                                     "--dport", str(sp.health_check_node_port), "-j", "ACCEPT"))

        # 6. A partial sync computes the rest for unchanged services but throws it away.
        if changed is not None and sp.service_key not in changed:
            nat_chains, nat_rules = skipped_chains, skipped_rules
        else:
            services_written += 1

        # 7. masquerade off-cluster traffic to the cluster IP (it may bounce off-node)
        if has_internal:
            masq: tuple[str, ...] = ("-A", internal_chain, "-m", "comment", "--comment",
                                     _q(f"{s} cluster IP"), *pm, "-d", sp.cluster_ip, *dport)
            if config.masquerade_all:
                nat_rules.write(_rule(masq, "-j", KUBE_MARK_MASQ))
            elif detector is not None:
                nat_rules.write(_rule(masq, detector[1], "-j", KUBE_MARK_MASQ))
        # 8. external destinations
        if uses_ext:
            nat_chains.write(_chain_line(chains.ext))
            active.add(chains.ext)
            if not sp.external_policy_local:
                # Cluster policy may cross nodes: always masquerade.
                nat_rules.write(_rule("-A", chains.ext, "-m", "comment", "--comment",
                                      _q(f"masquerade traffic for {s} external destinations"),
                                      "-j", KUBE_MARK_MASQ))
            else:
                if detector is not None:
                    # Pod -> external IP short-circuits to all endpoints, unmasqueraded, as if
                    # it had gone out to the load balancer and come back.
                    nat_rules.write(_rule("-A", chains.ext, "-m", "comment", "--comment",
                                          _q(f"pod traffic for {s} external destinations"), detector[0],
                                          "-j", chains.svc))
                # Host-originated traffic still needs SNAT: its source is a local address.
                nat_rules.write(_rule("-A", chains.ext, "-m", "comment", "--comment",
                                      _q(f"masquerade LOCAL traffic for {s} external destinations"),
                                      "-m", "addrtype", "--src-type", "LOCAL", "-j", KUBE_MARK_MASQ))
                nat_rules.write(_rule("-A", chains.ext, "-m", "comment", "--comment",
                                      _q(f"route LOCAL traffic for {s} external destinations"),
                                      "-m", "addrtype", "--src-type", "LOCAL", "-j", chains.svc))
            if has_external:
                nat_rules.write(_rule("-A", chains.ext, "-j", external_policy_chain))
        # 9. loadBalancerSourceRanges firewall
        if uses_fw:
            nat_chains.write(_chain_line(chains.fw))
            active.add(chains.fw)
            fw = ("-A", chains.fw, "-m", "comment", "--comment", _q(f"{s} loadbalancer IP"))
            allow_from_node = False
            for cidr in sp.load_balancer_source_ranges:
                nat_rules.write(_rule(fw, "-s", cidr, "-j", chains.ext))
                net = parse_cidr_sloppy(cidr)
                allow_from_node = allow_from_node or (node_ip is not None and net is not None
                                                      and node_ip.version == net.version and node_ip in net)
            if allow_from_node:
                # A VIP bound locally loops node->VIP traffic back with the VIP as source.
                for vip in sp.load_balancer_vips:
                    nat_rules.write(_rule(fw, "-s", vip, "-j", chains.ext))
            nat_rules.write(_rule("-A", chains.fw, "-m", "comment", "--comment",
                                  _q(f"other traffic to {s} will be dropped by KUBE-PROXY-FIREWALL")))
        # 10. endpoint dispatch
        if uses_cluster_chain:
            nat_chains.write(_chain_line(chains.svc))
            active.add(chains.svc)
            _write_dispatch(nat_rules, sp, chains.svc, cat.cluster, service_comment)
        if uses_local_chain:
            nat_chains.write(_chain_line(chains.svl))
            active.add(chains.svl)
            _write_dispatch(nat_rules, sp, chains.svl, cat.local, service_comment)
        # 11. one chain per reachable endpoint
        for ep in cat.all_reachable:
            sep = endpoint_chain_name(s, p, ep.endpoint)
            nat_chains.write(_chain_line(sep))
            active.add(sep)
            # Hairpin: a pod reaching itself through the service must be SNATed.
            nat_rules.write(_rule("-A", sep, service_comment(s), "-s", ep.ip, "-j", KUBE_MARK_MASQ))
            recent = ("-m", "recent", "--name", sep, "--set") if sp.session_affinity_client_ip else ()
            nat_rules.write(_rule("-A", sep, service_comment(s), recent, pm, "-j", "DNAT",
                                  "--to-destination", ep.endpoint))

    # Stale chains: flush (declare) and delete every service chain nobody uses any more.
    deleted = 0
    for chain in sorted(existing_nat_chains - active):
        if is_service_chain(chain):
            nat_chains_all.write(_chain_line(chain))
            nat_rules_all.write(f"-X {chain}")
            deleted += 1

    # The tail call to KUBE-NODEPORTS must come after every service portal rule.
    if not nodeport_cidrs:
        dst: tuple[str, ...] = ("-m", "addrtype", "--dst-type", "LOCAL")
        if ipv6:
            dst += ("!", "-d", "::1/128")
        elif not localhost_nodeports:
            dst += ("!", "-d", "127.0.0.0/8")
        nat_rules_all.write(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment", _LAST_RULE_COMMENT,
                                  dst, "-j", KUBE_NODEPORTS))
    else:
        for ip in _nodeport_ips(config, nodeport_cidrs, localhost_nodeports):
            nat_rules_all.write(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment", _LAST_RULE_COMMENT,
                                      "-d", ip, "-j", KUBE_NODEPORTS))

    # KUBE-FORWARD. INVALID packets can reset connections unless the kernel is tcp_be_liberal
    # (issues 74839, 117924).
    if not config.conntrack_tcp_be_liberal:
        nfacct = ("-m", "nfacct", "--nfacct-name", NFACCT_INVALID_DROPPED) if config.nfacct else ()
        filter_rules.write(_rule("-A", KUBE_FORWARD, "-m", "conntrack", "--ctstate", "INVALID", nfacct,
                                 "-j", "DROP"))
    # Forward marked (NodePort) traffic even under a FORWARD policy of DROP, and its replies.
    filter_rules.write(_rule("-A", KUBE_FORWARD, "-m", "comment", "--comment",
                             _q("kubernetes forwarding rules"),
                             "-m", "mark", "--mark", f"{mark}/{mark}", "-j", "ACCEPT"))
    filter_rules.write(_rule("-A", KUBE_FORWARD, "-m", "comment", "--comment",
                             _q("kubernetes forwarding conntrack rule"), "-m", "conntrack", "--ctstate",
                             "RELATED,ESTABLISHED", "-j", "ACCEPT"))

    text = "".join(line + "\n" for line in (
        "*filter", *filter_chains, *filter_rules.lines, "COMMIT",
        "*nat", *nat_chains_all.lines, *nat_rules_all.lines, "COMMIT"))
    return Ruleset(
        text=text,
        active_nat_chains=frozenset(active),
        filter_rules=filter_rules.count,
        nat_rules=nat_rules_all.count - deleted,
        nat_rules_skipped=skipped_rules.count,
        deleted_chains=deleted,
        full_sync=changed is None,
        service_ports=len(svc_ports),
        services_written=services_written,
        endpoints_total=endpoints_total,
        large_cluster_mode=large_cluster,
        no_local_endpoints_internal=no_local_internal,
        no_local_endpoints_external=no_local_external,
        health_check_node_ports=tuple(sorted({(sp.service_key, sp.health_check_node_port)
                                              for sp in svc_ports if sp.health_check_node_port})),
    )


def _write_dispatch(rules: _Lines, sp: ServicePortInfo, chain: str, endpoints: tuple[EndpointInfo, ...],
                    service_comment: Callable[[str], tuple[str, ...]]) -> None:
    """§7: SVC/SVL rules spreading connections over `endpoints` (writeServiceToEndpointRules)."""
    s, p = sp.svc_port_name, sp.proto
    seps = [endpoint_chain_name(s, p, ep.endpoint) for ep in endpoints]
    if sp.session_affinity_client_ip:
        # Sticky clients first: a recent match on the endpoint's own list wins.
        for ep, sep in zip(endpoints, seps, strict=True):
            rules.write(_rule("-A", chain, service_comment(_q(f"{s} -> {ep.endpoint}")), "-m", "recent",
                              "--name", sep, "--rcheck", "--seconds", str(sp.sticky_max_age_seconds),
                              "--reap",
                              "-j", sep))
    n = len(endpoints)
    for i, (ep, sep) in enumerate(zip(endpoints, seps, strict=True)):
        # Rule i matches with probability 1/(n-i) of what is left, so every endpoint gets 1/n;
        # e.g. n=3: 0.3333333333, then 0.5000000000, then the last rule always matches.
        # "%0.10f" formats exactly like Go's fmt.Sprintf("%0.10f").
        stat = ("-m", "statistic", "--mode", "random", "--probability", "%0.10f" % (1.0 / (n - i))) \
            if i < n - 1 else ()
        rules.write(_rule("-A", chain, service_comment(_q(f"{s} -> {ep.endpoint}")), stat, "-j", sep))
