"""Render Services + EndpointSlices into the iptables-restore payload of kube-proxy's iptables mode.

A rule-for-rule rendering of `syncProxyRules` in pkg/proxy/iptables/proxier.go (the behaviour is
described in reference/kube-proxy-iptables.md; section numbers below refer to it). `render` is
pure: no clock, no subprocess, no globals, no I/O. Everything that kube-proxy learns from the
machine (does iptables support --random-fully, do nfacct counters exist, what chains are in the
kernel now, is this a full or a partial sync) comes in as arguments, so the I/O layer decides and
this module only computes text.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from kubelab.models import EndpointSlice, Service

from .hashing import is_service_chain
from .serviceports import (
    EndpointInfo,
    EndpointsKey,
    IPAddress,
    IPFamily,
    IPNetwork,
    ServicePortInfo,
    build_endpoints_map,
    build_service_ports,
    family_of,
    parse_cidr_sloppy,
    parse_ip_sloppy,
)
from .servicerules import FragmentCache, RenderContext, service_fragment

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

_LAST_RULE_COMMENT = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'


class AddressConfig(Protocol):
    """What the NodePort addresses are computed from: iptables mode's ProxyConfig and nftables mode's
    NftConfig alike."""

    @property
    def node_ips(self) -> tuple[str, ...]: ...
    @property
    def nodeport_addresses(self) -> tuple[str, ...]: ...
    @property
    def ip_family(self) -> IPFamily: ...


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
    # `text` without the stale chains' declarations and `-X` lines; after a full sync (or a partial one
    # that wrote every service port) it is the whole of what this proxier owns in the kernel.
    text_without_deletions: str
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


def _rule(*parts: str | tuple[str, ...]) -> str:
    tokens: list[str] = []
    for part in parts:
        tokens.extend((part,) if isinstance(part, str) else part)
    return " ".join(tokens)


def _chain_line(chain: str) -> str:
    return f":{chain} - [0:0]"


def nodeport_cidrs_of(config: AddressConfig) -> list[IPNetwork]:
    """NewNodePortAddresses: --nodeport-addresses filtered to this family ("primary" = the node
    IP); an empty result means "match every local address", like kube-proxy's 0.0.0.0/0."""
    cidrs = []
    for text in config.nodeport_addresses:
        if text == "primary":
            ip = primary_node_ip(config)
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


def primary_node_ip(config: AddressConfig) -> IPAddress | None:
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


def _local_detector(config: ProxyConfig) -> tuple[str, str] | None:
    """The ClusterCIDR local-traffic detector: (IfLocal, IfNotLocal) args, or None for no-op."""
    if not config.cluster_cidr:
        return None
    net = parse_cidr_sloppy(config.cluster_cidr)
    if net is None or family_of(net) != config.ip_family:
        return None
    return f"-s {config.cluster_cidr}", f"! -s {config.cluster_cidr}"


@functools.lru_cache(maxsize=256)
def _addresses_of(config: ProxyConfig) -> tuple[tuple[IPNetwork, ...], bool, tuple[str, str] | None, IPAddress | None]:
    """What a render takes from the configuration's addresses, parsed once per configuration (not on
    every sync of every agent): the NodePort CIDRs, whether NodePorts answer on localhost, the
    local-traffic detector and the primary node IP. Pure (memoized; a config is immutable).

    NewProxier turns localhostNodePorts off unless --nodeport-addresses admits 127.0.0.0/8; the
    IPv6 proxier always runs without it."""
    cidrs = nodeport_cidrs_of(config)
    localhost = config.localhost_nodeports and config.ip_family != "IPv6" and _contains_ipv4_loopback(cidrs)
    return tuple(cidrs), localhost, _local_detector(config), primary_node_ip(config)



def render(
    services: Iterable[Service],
    slices: Iterable[EndpointSlice],
    config: ProxyConfig,
    *,
    changed: AbstractSet[str] | None = None,
    existing_nat_chains: AbstractSet[str] = frozenset(),
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
    svc_ports = build_service_ports(services, config.ip_family)
    endpoints_map = build_endpoints_map(slices, node_name=config.node_name, family=config.ip_family)
    return render_ports(svc_ports, endpoints_map, config, changed=changed, existing_nat_chains=existing_nat_chains)


def render_ports(
    svc_ports: Sequence[ServicePortInfo],
    endpoints_map: Mapping[EndpointsKey, tuple[EndpointInfo, ...]],
    config: ProxyConfig,
    *,
    changed: AbstractSet[str] | None = None,
    existing_nat_chains: AbstractSet[str] = frozenset(),
    applied_chains: AbstractSet[str] | None = None,
    cache: FragmentCache | None = None,
) -> Ruleset:
    """`render` on kube-proxy's own model: service ports (in the order to write them) and their
    endpoints, as `build_service_ports` / `build_endpoints_map` make them. Pure: a `cache` only
    saves work, the text is the same with or without it.

    `applied_chains`, in a partial sync, are the service chains the kernel holds from the syncs
    before (the last ruleset's `active_nat_chains`): a service port outside `changed` that needs a
    chain not among them is written whole too. Every rule of the payload then jumps only to chains
    it declares or the kernel has; kube-proxy gets the same guarantee from taking its changes and
    its maps together under one lock, and a single miss would fail the whole restore."""
    ipv6 = config.ip_family == "IPv6"
    mark = "0x%08x" % (1 << config.masquerade_bit)  # Go's "%#08x": 0x00004000 for bit 14
    nodeport_cidrs, localhost_nodeports, detector, node_ip = _addresses_of(config)
    no_endpoints: tuple[EndpointInfo, ...] = ()
    port_endpoints = [endpoints_map.get(sp.endpoints_key, no_endpoints) for sp in svc_ports]
    endpoints_total = sum(len(eps) for eps in port_endpoints)
    large_cluster = endpoints_total > LARGE_CLUSTER_ENDPOINTS_THRESHOLD
    ctx = RenderContext(ipv6=ipv6, masquerade_all=config.masquerade_all, detector=detector,
                        localhost_nodeports=localhost_nodeports, nfacct=config.nfacct,
                        node_ip=node_ip, large_cluster=large_cluster)

    filter_chains = [_chain_line(c) for c in (
        KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL)]
    nat_chains = [_chain_line(c) for c in (KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ)]
    filter_rules: list[str] = []
    # §5 static rules.
    nat_rules = [
        f"-A {KUBE_POSTROUTING} -m mark ! --mark {mark}/{mark} -j RETURN",
        # Clear the mark so a packet that re-traverses the stack is not masqueraded twice.
        f"-A {KUBE_POSTROUTING} -j MARK --xor-mark {mark}",
        f'-A {KUBE_POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE'
        + (" --random-fully" if config.random_fully else ""),
        f"-A {KUBE_MARK_MASQ} -j MARK --or-mark {mark}",
    ]
    if not ipv6 and localhost_nodeports:
        # route_localnet=1 opens a hole (issue 90259) this anti-martian rule closes.
        filter_chains.append(_chain_line(KUBE_FIREWALL))
        filter_rules.append(f'-A {KUBE_FIREWALL} -m comment --comment "block incoming localnet connections" '
                            "-d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT "
                            "-j DROP")

    active: set[str] = set()
    no_local_internal = no_local_external = services_written = 0
    skipped_rules = 0
    if cache is not None:
        cache.begin(ctx)
    for sp, eps in zip(svc_ports, port_endpoints, strict=True):
        frag = cache.lookup(sp, eps) if cache is not None else None
        if frag is None:
            frag = service_fragment(sp, eps, ctx)
            if cache is not None:
                cache.store(frag)
        filter_rules += frag.filter_rules
        nat_rules += frag.nat_jumps
        active.update(frag.active_chains)
        no_local_internal += frag.no_local_internal
        no_local_external += frag.no_local_external
        # A partial sync leaves an unchanged service's chains as they are in the kernel.
        if (changed is None or sp.service_key in changed
                or (applied_chains is not None and not all(c in applied_chains for c in frag.active_chains))):
            nat_chains += frag.nat_chains
            nat_rules += frag.nat_rules
            services_written += 1
        else:
            skipped_rules += len(frag.nat_rules)
    if cache is not None:
        cache.retain(svc_ports)

    # Stale chains: flush (declare) and delete every service chain nobody uses any more.
    stale = sorted(chain for chain in existing_nat_chains - active if is_service_chain(chain))
    owned_chains, owned_rules = len(nat_chains), len(nat_rules)
    nat_chains += [_chain_line(chain) for chain in stale]
    nat_rules += [f"-X {chain}" for chain in stale]

    # The tail call to KUBE-NODEPORTS must come after every service portal rule.
    if not nodeport_cidrs:
        dst: tuple[str, ...] = ("-m", "addrtype", "--dst-type", "LOCAL")
        if ipv6:
            dst += ("!", "-d", "::1/128")
        elif not localhost_nodeports:
            dst += ("!", "-d", "127.0.0.0/8")
        nat_rules.append(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment", _LAST_RULE_COMMENT,
                               dst, "-j", KUBE_NODEPORTS))
    else:
        for ip in _nodeport_ips(config, list(nodeport_cidrs), localhost_nodeports):
            nat_rules.append(_rule("-A", KUBE_SERVICES, "-m", "comment", "--comment", _LAST_RULE_COMMENT,
                                   "-d", ip, "-j", KUBE_NODEPORTS))

    # KUBE-FORWARD. INVALID packets can reset connections unless the kernel is tcp_be_liberal
    # (issues 74839, 117924).
    if not config.conntrack_tcp_be_liberal:
        nfacct = f" -m nfacct --nfacct-name {NFACCT_INVALID_DROPPED}" if config.nfacct else ""
        filter_rules.append(f"-A {KUBE_FORWARD} -m conntrack --ctstate INVALID{nfacct} -j DROP")
    # Forward marked (NodePort) traffic even under a FORWARD policy of DROP, and its replies.
    filter_rules.append(f'-A {KUBE_FORWARD} -m comment --comment "kubernetes forwarding rules" '
                        f"-m mark --mark {mark}/{mark} -j ACCEPT")
    filter_rules.append(f'-A {KUBE_FORWARD} -m comment --comment "kubernetes forwarding conntrack rule" '
                        "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")

    text = "\n".join(("*filter", *filter_chains, *filter_rules, "COMMIT",
                      "*nat", *nat_chains, *nat_rules, "COMMIT")) + "\n"
    # The same without the deletions (a join, not a render): what the table holds after the restore.
    owned = text if not stale else "\n".join((
        "*filter", *filter_chains, *filter_rules, "COMMIT", "*nat", *nat_chains[:owned_chains],
        *nat_rules[:owned_rules], *nat_rules[owned_rules + len(stale):], "COMMIT")) + "\n"
    return Ruleset(
        text=text,
        text_without_deletions=owned,
        active_nat_chains=frozenset(active),
        filter_rules=len(filter_rules),
        # `-X` lines are not rules (sync_proxy_rules_iptables_last{nat} = lines - deleted chains).
        nat_rules=len(nat_rules) - len(stale),
        nat_rules_skipped=skipped_rules,
        deleted_chains=len(stale),
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
