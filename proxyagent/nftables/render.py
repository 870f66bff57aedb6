"""Render Services + EndpointSlices + ServiceCIDRs into the transaction of kube-proxy's nftables mode.

A rule-for-rule rendering of `syncProxyRules` and `setupNFTables` in pkg/proxy/nftables/proxier.go
as of Kubernetes 1.33 (the release that made the mode GA), written as `nft -f` input the way
knftables writes it (`add table ...`, `add chain ...`, `add rule ...`, `add element ...`). Where the
iptables mode walks one rule per Service through KUBE-SERVICES, this mode dispatches through verdict
maps (`service-ips`, `service-nodeports`, `no-endpoint-*`, `firewall-ips`) keyed by
"address . protocol . port", so that a change touches a few elements and the chains of one Service.

`render_nft` is pure: no clock, no subprocess, no globals, no I/O. What kube-proxy learns from the
kernel (which chains and sets exist, what the maps held after the last sync) and whether this is a
full or a partial sync come in as arguments; the result says what to remember for the next sync.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from kubelab.models import EndpointSlice, Service

from ..render import nodeport_cidrs_of, primary_node_ip
from ..serviceports import (
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
    traffic_policy,
)
from .names import (
    AFFINITY_PREFIX,
    ENDPOINT_PREFIX,
    endpoint_base,
    is_affinity_set,
    is_service_chain,
    service_port_chains,
)

TABLE = "kube-proxy"

# Fixed chains, sets and maps (the constants at the top of proxier.go).
SERVICES = "services"
SERVICE_IPS = "service-ips"
SERVICE_NODEPORTS = "service-nodeports"
NODEPORT_IPS = "nodeport-ips"
CLUSTER_IPS = "cluster-ips"
SERVICE_ENDPOINTS_CHECK = "service-endpoints-check"
NODEPORT_ENDPOINTS_CHECK = "nodeport-endpoints-check"
NO_ENDPOINT_SERVICES = "no-endpoint-services"
NO_ENDPOINT_NODEPORTS = "no-endpoint-nodeports"
REJECT_CHAIN = "reject-chain"
CLUSTER_IPS_CHECK = "cluster-ips-check"
FIREWALL_IPS = "firewall-ips"
FIREWALL_CHECK = "firewall-check"
MARK_MASQ = "mark-for-masquerade"
MASQUERADING = "masquerading"

# Base chains: (name, type, hook, priority). knftables writes a named priority as its number
# (older nft binaries refuse "dstnat" in the output hook): dstnat = -100, srcnat = 100. The filter
# chains run at dstnat-10 so they see a Service's IP before DNAT; filter-output-post-dnat runs at
# dstnat+10, after it, to catch ClusterIP traffic nothing DNATed.
BASE_CHAINS: tuple[tuple[str, str, str, int], ...] = (
    ("filter-prerouting", "filter", "prerouting", -110),
    ("filter-input", "filter", "input", -110),
    ("filter-forward", "filter", "forward", -110),
    ("filter-output", "filter", "output", -110),
    ("filter-output-post-dnat", "filter", "output", -90),
    ("nat-prerouting", "nat", "prerouting", -100),
    ("nat-output", "nat", "output", -100),
    ("nat-postrouting", "nat", "postrouting", 100),
)

# nftablesJumpChains: (destination, source base chain, extra match). The endpoints checks are not
# jumped to from prerouting because `reject` is only valid in input/forward/output before Linux 5.9.
JUMP_CHAINS: tuple[tuple[str, str, str], ...] = (
    (NODEPORT_ENDPOINTS_CHECK, "filter-input", "ct state new"),
    (SERVICE_ENDPOINTS_CHECK, "filter-input", "ct state new"),
    (SERVICE_ENDPOINTS_CHECK, "filter-forward", "ct state new"),
    (SERVICE_ENDPOINTS_CHECK, "filter-output", "ct state new"),
    (FIREWALL_CHECK, "filter-prerouting", "ct state new"),
    (FIREWALL_CHECK, "filter-output", "ct state new"),
    (SERVICES, "nat-output", ""),
    (SERVICES, "nat-prerouting", ""),
    (MASQUERADING, "nat-postrouting", ""),
    (CLUSTER_IPS_CHECK, "filter-forward", "ct state new"),
    (CLUSTER_IPS_CHECK, "filter-output-post-dnat", "ct state new"),
)

# The containers kube-proxy tracks element by element (nftElementStorage), so that a partial sync
# adds and deletes only the elements that changed: name -> "set" or "map".
TRACKED: tuple[tuple[str, str], ...] = (
    (CLUSTER_IPS, "set"), (SERVICE_IPS, "map"), (FIREWALL_IPS, "map"),
    (NO_ENDPOINT_SERVICES, "map"), (NO_ENDPOINT_NODEPORTS, "map"), (SERVICE_NODEPORTS, "map"),
)

# What a tracked container held after a sync: container -> {"key . parts": "value"} ("" for a set).
Elements = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class NftConfig:
    """What kube-proxy knows about its node and flags, for one IP family's proxier."""

    node_name: str = ""
    node_ips: tuple[str, ...] = ()  # the node's addresses; the first of the family is its node IP
    cluster_cidr: str | None = None  # ClusterCIDR local detector; None => no-op detector
    masquerade_all: bool = False
    masquerade_bit: int = 14
    # --nodeport-addresses as kube-proxy ends up with it. Empty (or a /0) = every local address;
    # note that kube-proxy defaults this to ["primary"] in nftables mode (the CLI does too).
    nodeport_addresses: tuple[str, ...] = ()
    service_cidrs: tuple[str, ...] = ()  # every ServiceCIDR's spec.cidrs (OnServiceCIDRsChanged)
    ip_family: IPFamily = "IPv4"


@dataclass(frozen=True)
class ServiceFootprint:
    """What one Service's ports contribute to a sync: its chains, affinity sets, tracked elements
    ((container, key) pairs) and its share of the counts kube-proxy's metrics report."""

    chains: frozenset[str] = frozenset()
    affinity_sets: frozenset[str] = frozenset()
    elements: frozenset[tuple[str, str]] = frozenset()
    service_ports: int = 0
    endpoints: int = 0
    no_local_internal: int = 0
    no_local_external: int = 0
    health_check_node_ports: frozenset[tuple[str, int]] = frozenset()


class SupersededError(RuntimeError):
    """A ruleset whose bookkeeping a later partial sync has taken over and updated in place."""


@dataclass(eq=False)
class _Bookkeeping:
    """What one sync leaves for the next: the tracked containers' elements, the active chains and
    affinity sets, each Service's footprint. A proportional partial sync updates it in place (work
    proportional to the change, not to the table) and hands it on to its own ruleset; `holder` is
    the one ruleset that may read it."""

    elements: dict[str, dict[str, str]]
    active_chains: set[str]
    active_affinity_sets: set[str]
    footprints: dict[str, ServiceFootprint]
    shared_keys: frozenset[tuple[str, str]]
    footprinted: bool  # footprints cover every Service
    holder: object = None


@dataclass(frozen=True)
class NftRuleset:
    """One sync's transaction plus what the next sync needs and kube-proxy's metrics count.

    `elements`, `active_chains`, `active_affinity_sets` and `footprints` are live: a partial sync
    given this ruleset as `previous` takes them over and updates them (as kube-proxy's proxier updates
    its own fields), after which reading them here raises SupersededError rather than show the later
    sync's state. Keep the previous ruleset's view with `snapshot()` first if it is needed afterwards."""

    text: str  # `nft -f` input, in write order, newline-terminated lines
    full_sync: bool
    stale_chains: tuple[str, ...]  # flushed now; kube-proxy deletes them >= 1 s later (kernel < 6.2)
    operations: int  # lines in the transaction
    service_ports: int
    services_written: int  # service ports whose chains and rules this transaction (re)wrote
    endpoints_total: int
    no_local_endpoints_internal: int
    no_local_endpoints_external: int
    health_check_node_ports: tuple[tuple[str, int], ...] = field(default=())
    _book: _Bookkeeping = field(default_factory=lambda: _Bookkeeping({}, set(), set(), {}, frozenset(), False),
                                repr=False, compare=False)

    def __post_init__(self) -> None:
        self._book.holder = self

    def _live(self) -> _Bookkeeping:
        if self._book.holder is not self:
            raise SupersededError("a later partial sync took this ruleset's bookkeeping over")
        return self._book

    @property
    def elements(self) -> Mapping[str, Mapping[str, str]]:
        """The tracked containers' contents after this transaction."""
        return self._live().elements

    @property
    def active_chains(self) -> AbstractSet[str]:
        """Per-service/endpoint chains in use after this sync."""
        return self._live().active_chains

    @property
    def active_affinity_sets(self) -> AbstractSet[str]:
        return self._live().active_affinity_sets

    @property
    def footprints(self) -> Mapping[str, ServiceFootprint]:
        """Per Service ("namespace/name"), what its ports put in the table: what lets the next partial
        sync redo only the changed Services (render_nft_ports' `previous`)."""
        return self._live().footprints

    @property
    def shared_keys(self) -> frozenset[tuple[str, str]]:
        """Map/set keys that more than one Service wrote (two Services on one external IP and port):
        a partial sync touching one of them walks every port, as kube-proxy does."""
        return self._live().shared_keys

    @property
    def footprinted(self) -> bool:
        return self._live().footprinted

    @property
    def superseded(self) -> bool:
        return self._book.holder is not self

    def snapshot(self) -> NftRuleset:
        """A copy whose bookkeeping no later sync will touch (O(table): for tests and tools)."""
        book = self._live()
        return dataclasses.replace(self, _book=_Bookkeeping(
            {name: dict(e) for name, e in book.elements.items()}, set(book.active_chains),
            set(book.active_affinity_sets), dict(book.footprints), book.shared_keys, book.footprinted))


def go_quote(text: str) -> str:
    """Go's %q for the comment strings kube-proxy writes (names and fixed words: plain ASCII)."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class _Transaction:
    """knftables.Transaction's text for one table: every object is named in full."""

    def __init__(self, family: str) -> None:
        self.prefix = f"{family} {TABLE}"
        self.lines: list[str] = []

    def add_table(self, comment: str) -> None:
        self.lines.append(f"add table {self.prefix} {{ comment {go_quote(comment)} ; }}")

    def add_chain(self, name: str, *, base: tuple[str, str, int] | None = None, comment: str | None = None) -> None:
        props = []
        if base is not None:
            kind, hook, priority = base
            props.append(f"type {kind} hook {hook} priority {priority} ;")
        if comment is not None:
            props.append(f"comment {go_quote(comment)} ;")
        tail = f" {{ {' '.join(props)} }}" if props else ""
        self.lines.append(f"add chain {self.prefix} {name}{tail}")

    def add_set(self, kind: str, name: str, type_: str, *, flags: str = "", timeout: int | None = None,
                comment: str | None = None) -> None:
        props = [f"type {type_} ;"]
        if flags:
            props.append(f"flags {flags} ;")
        if timeout is not None:
            props.append(f"timeout {timeout}s ;")
        if comment is not None:
            props.append(f"comment {go_quote(comment)} ;")
        self.lines.append(f"add {kind} {self.prefix} {name} {{ {' '.join(props)} }}")

    def verb(self, verb: str, kind: str, name: str) -> None:
        """flush/delete of a chain, set or map."""
        self.lines.append(f"{verb} {kind} {self.prefix} {name}")

    def add_rule(self, chain: str, rule: str, comment: str | None = None) -> None:
        tail = f" comment {go_quote(comment)}" if comment is not None else ""
        self.lines.append(f"add rule {self.prefix} {chain} {rule}{tail}")

    def add_element(self, container: str, key: str, value: str = "", comment: str | None = None) -> None:
        text = key + (f" comment {go_quote(comment)}" if comment is not None else "") + (f" : {value}" if value else "")
        self.lines.append(f"add element {self.prefix} {container} {{ {text} }}")

    def delete_element(self, container: str, key: str) -> None:
        self.lines.append(f"delete element {self.prefix} {container} {{ {key} }}")


class _ElementStorage:
    """nftElementStorage: a tracked set or map as kube-proxy believes the kernel holds it.

    `base` is what the last sync left; this sync's adds and deletes go to `changes` and reach `base`
    only at `commit`, so that a partial sync that has to give up (a shared key) leaves it untouched,
    and one that succeeds updates it in place rather than copy every element."""

    def __init__(self, name: str, base: dict[str, str], *, leftover: set[str] | None = None) -> None:
        self.name = name
        self.base = base
        self.changes: dict[str, str | None] = {}  # key -> new value, None: deleted
        # The keys a sync must re-ensure or delete: all of them, or (a partial sync redoing only
        # some Services) those Services' previous keys.
        self.leftover: set[str] = set(base) if leftover is None else leftover
        self.written: list[str] = []  # keys ensured by the port being rendered (its footprint)

    def reset(self, tx: _Transaction, kind: str) -> None:
        self.base.clear()
        self.changes.clear()
        self.leftover.clear()
        tx.verb("flush", kind, self.name)

    def ensure(self, tx: _Transaction, key: str, value: str = "", comment: str | None = None) -> None:
        self.written.append(key)
        existing = self.changes[key] if key in self.changes else self.base.get(key)
        if existing is None:
            tx.add_element(self.name, key, value, comment)
            self.changes[key] = value
            return
        if existing != value:
            tx.delete_element(self.name, key)
            tx.add_element(self.name, key, value, comment)
            self.changes[key] = value
        self.leftover.discard(key)

    def cleanup(self, tx: _Transaction) -> None:
        # kube-proxy walks a Go set here; sorted for a deterministic text.
        for key in sorted(self.leftover):
            tx.delete_element(self.name, key)
            self.changes[key] = None
        self.leftover.clear()

    def commit(self) -> dict[str, str]:
        for key, value in self.changes.items():
            if value is None:
                self.base.pop(key, None)
            else:
                self.base[key] = value
        self.changes.clear()
        return self.base


def _nodeport_ips(config: NftConfig, cidrs: Sequence[IPNetwork]) -> list[str]:
    """GetNodeIPs: the node's addresses inside the CIDRs, loopback left out (kube-proxy logs
    "localhost NodePorts are not supported" for it: the nftables mode never serves them)."""
    ips = (parse_ip_sloppy(t) for t in config.node_ips)
    found = {ip for ip in ips if ip is not None and family_of(ip) == config.ip_family
             and any(ip in net for net in cidrs) and not ip.is_loopback}
    return [str(ip) for ip in sorted(found, key=lambda ip: ip.packed)]


def _service_cidrs(config: NftConfig) -> str:
    """OnServiceCIDRsChanged: this family's CIDRs, comma-joined as knftables takes them. kube-proxy
    collects them from a set (random order); sorted, and duplicates dropped, here."""
    keep: set[str] = set()
    for text in config.service_cidrs:
        net = parse_cidr_sloppy(text.strip())
        # Written as parsed, never as given: only an address and a prefix ever reach the rule.
        if net is not None and family_of(net) == config.ip_family:
            keep.add(str(net))
    return ",".join(sorted(keep))


def _local_detector(config: NftConfig, ip_x: str) -> tuple[str, str] | None:
    """The ClusterCIDR detector's IfLocalNFT / IfNotLocalNFT, or None for the no-op detector."""
    if not config.cluster_cidr:
        return None
    net = parse_cidr_sloppy(config.cluster_cidr)
    if net is None or family_of(net) != config.ip_family:
        return None
    return f"{ip_x} saddr {config.cluster_cidr}", f"{ip_x} saddr != {config.cluster_cidr}"


def _setup(tx: _Transaction, config: NftConfig, *, first_sync: bool, mark: str, ip_x: str, addr: str,
           nodeport_cidrs: Sequence[IPNetwork], stores: Mapping[str, _ElementStorage]) -> None:
    """setupNFTables: the fixed part every full sync rewrites."""
    no_localhost = "ip daddr != 127.0.0.0/8" if ip_x == "ip" else "ip6 daddr != ::1"
    match_all = not nodeport_cidrs
    tx.add_table("rules for kube-proxy")
    if first_sync:
        # Once per process: add+delete every base chain so that a kube-proxy of another version,
        # with other hooks or priorities, cannot make the "add" below fail.
        for name, _, _, _ in BASE_CHAINS:
            tx.add_chain(name)
            tx.verb("delete", "chain", name)
    for name, kind, hook, priority in BASE_CHAINS:
        tx.add_chain(name, base=(kind, hook, priority))
        tx.verb("flush", "chain", name)
    created: set[str] = set()

    def ensure(chain: str) -> None:
        if chain not in created:
            created.add(chain)
            tx.add_chain(chain)
            tx.verb("flush", "chain", chain)

    for dst, src, extra in JUMP_CHAINS:
        ensure(dst)
        tx.add_rule(src, f"{extra} jump {dst}".strip())
    for chain in (SERVICES, CLUSTER_IPS_CHECK, MASQUERADING, MARK_MASQ):
        ensure(chain)
    tx.add_rule(MARK_MASQ, f"mark set mark or {mark}")
    tx.add_rule(MASQUERADING, f"mark and {mark} == 0 return")
    # Clear the mark so that a packet re-entering the stack is not masqueraded twice.
    tx.add_rule(MASQUERADING, f"mark set mark xor {mark}")
    tx.add_rule(MASQUERADING, "masquerade fully-random")

    tx.add_set("set", CLUSTER_IPS, addr, comment="Active ClusterIPs")
    # A packet for a ClusterIP on a port no Service has got past service-ips: reject it, and drop
    # anything for an address of a Service CIDR that no Service holds (KEP-4450 / 1.33).
    tx.add_rule(CLUSTER_IPS_CHECK, f"{ip_x} daddr @{CLUSTER_IPS} reject",
                "Reject traffic to invalid ports of ClusterIPs")
    service_cidrs = _service_cidrs(config)
    if service_cidrs:
        tx.add_rule(CLUSTER_IPS_CHECK, f"{ip_x} daddr {{ {service_cidrs} }} drop",
                    "Drop traffic to unallocated ClusterIPs")

    # nodeport-ips exists only with --nodeport-addresses; "add" before "delete" so that deleting a
    # set that is not there is no error.
    tx.add_set("set", NODEPORT_IPS, addr, comment="IPs that accept NodePort traffic")
    if match_all:
        tx.verb("delete", "set", NODEPORT_IPS)
    else:
        tx.verb("flush", "set", NODEPORT_IPS)
        for ip in _nodeport_ips(config, nodeport_cidrs):
            tx.add_element(NODEPORT_IPS, ip)

    tx.add_set("map", NO_ENDPOINT_SERVICES, f"{addr} . inet_proto . inet_service : verdict",
               comment="vmap to drop or reject packets to services with no endpoints")
    tx.add_set("map", NO_ENDPOINT_NODEPORTS, "inet_proto . inet_service : verdict",
               comment="vmap to drop or reject packets to service nodeports with no endpoints")
    tx.add_chain(REJECT_CHAIN, comment="helper for @no-endpoint-services / @no-endpoint-nodeports")
    tx.verb("flush", "chain", REJECT_CHAIN)
    tx.add_rule(REJECT_CHAIN, "reject")
    tx.add_rule(SERVICE_ENDPOINTS_CHECK, f"{ip_x} daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}")
    nodeport_dst = no_localhost if match_all else f"{ip_x} daddr @{NODEPORT_IPS}"
    tx.add_rule(NODEPORT_ENDPOINTS_CHECK, f"{nodeport_dst} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}")

    tx.add_set("map", FIREWALL_IPS, f"{addr} . inet_proto . inet_service : verdict",
               comment="destinations that are subject to LoadBalancerSourceRanges")
    ensure(FIREWALL_CHECK)
    tx.add_rule(FIREWALL_CHECK, f"{ip_x} daddr . meta l4proto . th dport vmap @{FIREWALL_IPS}")

    tx.add_set("map", SERVICE_IPS, f"{addr} . inet_proto . inet_service : verdict",
               comment="ClusterIP, ExternalIP and LoadBalancer IP traffic")
    tx.add_set("map", SERVICE_NODEPORTS, "inet_proto . inet_service : verdict", comment="NodePort traffic")
    tx.add_rule(SERVICES, f"{ip_x} daddr . meta l4proto . th dport vmap @{SERVICE_IPS}")
    if match_all:
        tx.add_rule(SERVICES, f"fib daddr type local {no_localhost} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}")
    else:
        tx.add_rule(SERVICES, f"{ip_x} daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}")

    for name, kind in TRACKED:
        stores[name].reset(tx, kind)


def render_nft(
    services: Iterable[Service],
    slices: Iterable[EndpointSlice],
    config: NftConfig,
    *,
    changed: AbstractSet[str] | None = None,
    previous_elements: Elements | None = None,
    existing_chains: AbstractSet[str] = frozenset(),
    existing_sets: AbstractSet[str] = frozenset(),
    first_sync: bool = False,
) -> NftRuleset:
    """The transaction kube-proxy's nftables proxier sends for these objects (syncProxyRules). Pure.

    `changed=None` is a full sync: the fixed chains, sets and maps are rewritten and the tracked
    maps flushed and refilled. A set of "namespace/name" keys is a partial sync: only those
    Services' chains and rules are rewritten, and only the map elements that differ from
    `previous_elements` (what the last sync's `elements` said) are deleted and added.
    `existing_chains`/`existing_sets` are the table's chains and sets now (`nft list chains`):
    per-service chains nobody uses any more are flushed (and reported in `stale_chains`, to be
    deleted later), unused affinity sets deleted. `first_sync` is kube-proxy's first transaction
    after start, which recreates the base chains.
    """
    svc_ports = build_service_ports(services, config.ip_family)
    endpoints_map = build_endpoints_map(slices, node_name=config.node_name, family=config.ip_family)
    return render_nft_ports(svc_ports, endpoints_map, config, changed=changed, previous_elements=previous_elements,
                            existing_chains=existing_chains, existing_sets=existing_sets, first_sync=first_sync)


def render_nft_ports(
    svc_ports: Sequence[ServicePortInfo] | Callable[[], Sequence[ServicePortInfo]],
    endpoints_map: Mapping[EndpointsKey, tuple[EndpointInfo, ...]],
    config: NftConfig,
    *,
    changed: AbstractSet[str] | None = None,
    previous_elements: Elements | None = None,
    previous: NftRuleset | None = None,
    changed_ports: Sequence[ServicePortInfo] | None = None,
    stale_chains: AbstractSet[str] = frozenset(),
    existing_chains: AbstractSet[str] = frozenset(),
    existing_sets: AbstractSet[str] = frozenset(),
    first_sync: bool = False,
) -> NftRuleset:
    """`render_nft` on kube-proxy's own model (service ports and their sorted endpoints). Pure.

    A partial sync given `previous` (the last successful sync's ruleset) does work proportional to
    the change: it walks only the changed Services' ports (`changed_ports`, in `svc_ports` order, or
    those picked out of `svc_ports`), deletes only their previous elements that are no longer written,
    and updates `previous`' bookkeeping in place for the ruleset it returns (`previous` is superseded:
    see NftRuleset). The table is then taken to hold `previous`' active chains and affinity sets plus
    `stale_chains` (chains an earlier sync flushed and nobody deleted yet: kube-proxy's staleChains);
    `existing_chains`/`existing_sets` are for the walk and must not be given with `previous`. The
    transaction is the one the walk of every port writes. `svc_ports` may be a function returning
    them, called only when every port must be walked: a full sync, no `previous`, or a changed Service
    sharing a map key with another Service (then which one wins depends on every port's order, as in
    kube-proxy's walk).
    """
    if previous is not None and changed is not None:
        if existing_chains or existing_sets:
            raise ValueError("a partial sync from `previous` takes `stale_chains`, not the table's chains")
        if previous.footprinted:
            ruleset = _render_changed(previous, changed, changed_ports, svc_ports, endpoints_map, config,
                                      stale_chains=stale_chains)
            if ruleset is not None:
                return ruleset
        # The walk, on the table as `previous` left it (untouched: nothing was committed).
        previous_elements = previous.elements
        existing_chains = frozenset(previous.active_chains) | stale_chains
        existing_sets = frozenset(previous.active_affinity_sets)
    ports = svc_ports() if callable(svc_ports) else svc_ports
    full = changed is None
    previous_elements = previous_elements or {}
    stores = {name: _ElementStorage(name, {} if full else dict(previous_elements.get(name) or {}))
              for name, _ in TRACKED}
    ctx = _context(config)
    if full:
        _setup(ctx.tx, config, first_sync=first_sync, mark=ctx.mark, ip_x=ctx.ip_x, addr=ctx.addr,
               nodeport_cidrs=nodeport_cidrs_of(config), stores=stores)
    active: set[str] = set()
    footprints: dict[str, ServiceFootprint] = {}
    owner: dict[tuple[str, str], str] = {}
    shared: set[tuple[str, str]] = set()
    written = 0
    for sp in ports:
        skip = not full and sp.service_key not in (changed or ())
        port = _render_port(ctx, sp, endpoints_map.get(sp.endpoints_key, ()), stores, active, skip=skip)
        written += not skip
        for key in port.elements:
            if owner.setdefault(key, sp.service_key) != sp.service_key:
                shared.add(key)
        footprints[sp.service_key] = _merge(footprints.get(sp.service_key), port)
    active_affinity = {s for fp in footprints.values() for s in fp.affinity_sets}
    fps = footprints.values()
    counts = (sum(fp.service_ports for fp in fps), sum(fp.endpoints for fp in fps),
              sum(fp.no_local_internal for fp in fps), sum(fp.no_local_external for fp in fps),
              tuple(sorted(hc for fp in fps for hc in fp.health_check_node_ports)))
    # Stale chains cannot be deleted at once: before Linux 6.2 the kernel notices only a little
    # later that a deleted map element no longer references a chain. Flush now, delete later.
    stale = sorted(c for c in existing_chains if c not in active and is_service_chain(c))
    gone_sets = sorted(s for s in existing_sets if s not in active_affinity and is_affinity_set(s))
    book = _Bookkeeping({}, active, active_affinity, footprints, frozenset(shared), footprinted=True)
    return _finish(ctx, stores, book, full=full, written=written, stale=stale, gone_sets=gone_sets, counts=counts)


@dataclass
class _Context:
    """What every port's rendering shares in one sync."""

    config: NftConfig
    tx: _Transaction
    ip_x: str
    addr: str
    mark: str
    detector: tuple[str, str] | None
    node_ip: IPAddress | None


def _context(config: NftConfig) -> _Context:
    ipv6 = config.ip_family == "IPv6"
    ip_x, addr = ("ip6", "ipv6_addr") if ipv6 else ("ip", "ipv4_addr")
    return _Context(config=config, tx=_Transaction("ip6" if ipv6 else "ip"), ip_x=ip_x, addr=addr,
                    mark="0x%08x" % (1 << config.masquerade_bit),  # Go's "%#08x": 0x00004000 for bit 14
                    detector=_local_detector(config, ip_x), node_ip=primary_node_ip(config))


def _merge(footprint: ServiceFootprint | None, port: ServiceFootprint) -> ServiceFootprint:
    """A Service's footprint with one more of its ports."""
    if footprint is None:
        return port
    return ServiceFootprint(
        chains=footprint.chains | port.chains, affinity_sets=footprint.affinity_sets | port.affinity_sets,
        elements=footprint.elements | port.elements, service_ports=footprint.service_ports + port.service_ports,
        endpoints=footprint.endpoints + port.endpoints,
        no_local_internal=footprint.no_local_internal + port.no_local_internal,
        no_local_external=footprint.no_local_external + port.no_local_external,
        health_check_node_ports=footprint.health_check_node_ports | port.health_check_node_ports)


def _render_changed(
    previous: NftRuleset,
    changed: AbstractSet[str],
    changed_ports: Sequence[ServicePortInfo] | None,
    svc_ports: Sequence[ServicePortInfo] | Callable[[], Sequence[ServicePortInfo]],
    endpoints_map: Mapping[EndpointsKey, tuple[EndpointInfo, ...]],
    config: NftConfig,
    *,
    stale_chains: AbstractSet[str],
) -> NftRuleset | None:
    """A partial sync walking only the changed Services' ports and touching only their share of
    `previous`' bookkeeping, or None (nothing touched) when a key one of them writes or wrote
    belongs to another Service too (the caller then walks every port)."""
    book = previous._live()
    if changed_ports is None:
        ports = svc_ports() if callable(svc_ports) else svc_ports
        changed_ports = [sp for sp in ports if sp.service_key in changed]
    old = {service: book.footprints.get(service, ServiceFootprint()) for service in changed}
    old_keys = {key: service for service, fp in old.items() for key in fp.elements}
    if any(key in book.shared_keys for key in old_keys):
        return None
    leftover: dict[str, set[str]] = {name: set() for name, _ in TRACKED}
    for container, element in old_keys:
        leftover[container].add(element)
    stores = {name: _ElementStorage(name, book.elements.setdefault(name, {}), leftover=leftover[name])
              for name, _ in TRACKED}
    ctx = _context(config)
    active: set[str] = set()
    new: dict[str, ServiceFootprint] = {}
    writer: dict[tuple[str, str], str] = {}
    for sp in changed_ports:
        port = _render_port(ctx, sp, endpoints_map.get(sp.endpoints_key, ()), stores, active, skip=False)
        for key in port.elements:
            # A key another Service holds now, or another changed Service writes too: shared.
            if (key[1] in book.elements[key[0]] and old_keys.get(key) != sp.service_key) \
                    or writer.setdefault(key, sp.service_key) != sp.service_key:
                return None
        new[sp.service_key] = _merge(new.get(sp.service_key), port)
    # Committed from here on: the bookkeeping is updated by the changed Services' shares only.
    # A chain or affinity set is named after its Service, so no other Service holds theirs.
    gone = {c for fp in old.values() for c in fp.chains} - active
    new_sets = {s for fp in new.values() for s in fp.affinity_sets}
    gone_sets = {s for fp in old.values() for s in fp.affinity_sets} - new_sets
    book.active_chains.difference_update(gone)
    book.active_chains.update(active)
    book.active_affinity_sets.difference_update(gone_sets)
    book.active_affinity_sets.update(new_sets)
    for service in changed:
        book.footprints.pop(service, None)
    book.footprints.update(new)
    # The walk flushes every service chain of the table that is not active: previous' active ones
    # the changed Services dropped, and those earlier syncs flushed and nobody deleted yet.
    stale = sorted(c for c in gone | {c for c in stale_chains if c not in active}
                   if c not in book.active_chains and is_service_chain(c))
    return _finish(ctx, stores, book, full=False, written=len(changed_ports), stale=stale,
                   gone_sets=sorted(s for s in gone_sets if is_affinity_set(s)),
                   counts=_counts(previous, old.values(), new.values()))


def _counts(previous: NftRuleset, old: Iterable[ServiceFootprint],
            new: Iterable[ServiceFootprint]) -> tuple[int, int, int, int, tuple[tuple[str, int], ...]]:
    """The previous sync's totals with the changed Services' shares swapped."""
    totals = [previous.service_ports, previous.endpoints_total, previous.no_local_endpoints_internal,
              previous.no_local_endpoints_external]
    hc = set(previous.health_check_node_ports)
    for sign, fps in ((-1, old), (1, new)):
        for fp in fps:
            for i, value in enumerate((fp.service_ports, fp.endpoints, fp.no_local_internal, fp.no_local_external)):
                totals[i] += sign * value
            if sign < 0:
                hc -= fp.health_check_node_ports
            else:
                hc |= fp.health_check_node_ports
    return totals[0], totals[1], totals[2], totals[3], tuple(sorted(hc))


def _finish(ctx: _Context, stores: Mapping[str, _ElementStorage], book: _Bookkeeping, *, full: bool, written: int,
            stale: list[str], gone_sets: list[str],
            counts: tuple[int, int, int, int, tuple[tuple[str, int], ...]]) -> NftRuleset:
    """Stale chains flushed, unused affinity sets deleted, leftover elements deleted, and the ruleset
    that now holds `book` (its elements committed)."""
    tx = ctx.tx
    for chain in stale:
        tx.verb("flush", "chain", chain)
    for name in gone_sets:
        tx.verb("delete", "set", name)
    for name, _ in TRACKED:
        stores[name].cleanup(tx)
        book.elements[name] = stores[name].commit()
    text = "".join(line + "\n" for line in tx.lines)
    return NftRuleset(
        text=text, full_sync=full, stale_chains=tuple(stale), operations=len(tx.lines), service_ports=counts[0],
        services_written=written, endpoints_total=counts[1], no_local_endpoints_internal=counts[2],
        no_local_endpoints_external=counts[3], health_check_node_ports=counts[4], _book=book)


def _render_port(ctx: _Context, sp: ServicePortInfo, eps: Sequence[EndpointInfo],
                 stores: Mapping[str, _ElementStorage], active: set[str], *, skip: bool) -> ServiceFootprint:
    """One service port of syncProxyRules' loop: its elements (ensured in `stores`) and, unless
    `skip` (a partial sync's unchanged Service), its chains and rules. Returns its footprint."""
    tx, ip_x, config, detector = ctx.tx, ctx.ip_x, ctx.config, ctx.detector
    for store in stores.values():
        store.written.clear()
    chains_used: set[str] = set()
    affinity_sets: set[str] = set()
    no_local_internal = no_local_external = 0

    def ensure_chain(chain: str) -> None:
        # ensureChain: add+flush once per sync; a partial sync only notes an untouched chain.
        chains_used.add(chain)
        if chain not in active:
            active.add(chain)
            if not skip:
                tx.add_chain(chain)
                tx.verb("flush", "chain", chain)

    policy = traffic_policy(eps, sp)
    cluster, local, reachable = policy.endpoints.cluster, policy.endpoints.local, policy.endpoints.all_reachable
    has_endpoints = policy.endpoints.has_any
    proto, name = sp.proto, sp.svc_port_name
    chains = service_port_chains(sp.namespace, sp.name, proto, sp.port_name)
    affinity = sp.session_affinity_client_ip

    ep_chain: dict[str, str] = {}
    for ep in reachable:
        base = endpoint_base(sp.namespace, sp.name, proto, sp.port_name, ep.ip, ep.port)
        ep_chain[ep.endpoint] = ENDPOINT_PREFIX + base
        ensure_chain(ENDPOINT_PREFIX + base)
        if affinity:
            affinity_sets.add(AFFINITY_PREFIX + base)

    uses_cluster_chain, uses_local_chain = policy.uses_cluster_chain, policy.uses_local_chain
    if uses_cluster_chain:
        ensure_chain(chains.cluster)
    if uses_local_chain:
        ensure_chain(chains.local)

    internal_chain, has_internal = chains.local if policy.internal_local else chains.cluster, policy.has_internal
    external_policy_chain = chains.local if policy.external_local else chains.cluster
    has_external = policy.has_external
    uses_external_chain = policy.uses_external_chain
    if uses_external_chain:
        ensure_chain(chains.external)

    if not has_endpoints:
        internal_verdict = external_verdict = f"goto {REJECT_CHAIN}"
    else:
        internal_verdict = external_verdict = ""
        if policy.no_local_internal:  # iTP Local with no local endpoint: drop ClusterIP traffic
            internal_verdict = "drop"
            no_local_internal += 1
        if policy.no_local_external:  # eTP Local with no local endpoint: drop what is not short-circuited
            external_verdict = "drop"
            no_local_external += 1

    port = sp.port
    stores[CLUSTER_IPS].ensure(tx, sp.cluster_ip)
    cip_key = f"{sp.cluster_ip} . {proto} . {port}"
    if has_internal:
        stores[SERVICE_IPS].ensure(tx, cip_key, f"goto {internal_chain}")
    else:
        stores[NO_ENDPOINT_SERVICES].ensure(tx, cip_key, internal_verdict, name)
    for eip in sp.external_ips:
        key = f"{eip} . {proto} . {port}"
        if has_endpoints:
            stores[SERVICE_IPS].ensure(tx, key, f"goto {chains.external}")
        if not has_external:
            stores[NO_ENDPOINT_SERVICES].ensure(tx, key, external_verdict, name)
    # Source ranges are enforced in filter-prerouting, before DNAT, whatever the endpoints.
    uses_fw_chain = bool(sp.load_balancer_vips) and bool(sp.load_balancer_source_ranges)
    if uses_fw_chain:
        ensure_chain(chains.firewall)
    for vip in sp.load_balancer_vips:
        key = f"{vip} . {proto} . {port}"
        if has_endpoints:
            stores[SERVICE_IPS].ensure(tx, key, f"goto {chains.external}")
        if uses_fw_chain:
            stores[FIREWALL_IPS].ensure(tx, key, f"goto {chains.firewall}")
    if not has_external:
        for vip in sp.load_balancer_vips:
            stores[NO_ENDPOINT_SERVICES].ensure(tx, f"{vip} . {proto} . {port}", external_verdict, name)
    if sp.node_port:
        key = f"{proto} . {sp.node_port}"
        # NodePorts are not subject to loadBalancerSourceRanges (they go to external-, never firewall-).
        if has_endpoints:
            stores[SERVICE_NODEPORTS].ensure(tx, key, f"goto {chains.external}")
        if not has_external:
            stores[NO_ENDPOINT_NODEPORTS].ensure(tx, key, external_verdict, name)

    footprint = ServiceFootprint(
        chains=frozenset(chains_used), affinity_sets=frozenset(affinity_sets),
        elements=frozenset((store.name, key) for store in stores.values() for key in store.written),
        service_ports=1, endpoints=len(eps), no_local_internal=no_local_internal, no_local_external=no_local_external,
        health_check_node_ports=frozenset({(sp.service_key, sp.health_check_node_port)}
                                          if sp.health_check_node_port else ()))
    if skip:
        return footprint
    if has_internal:
        match = f"{ip_x} daddr {sp.cluster_ip} {proto} dport {port}"
        if config.masquerade_all:
            tx.add_rule(internal_chain, f"{match} jump {MARK_MASQ}")
        elif detector is not None:
            # Off-cluster traffic to a ClusterIP (a static route to any node) may bounce off-node.
            tx.add_rule(internal_chain, f"{match} {detector[1]} jump {MARK_MASQ}")
    if uses_external_chain:
        if not sp.external_policy_local:
            # Cluster policy may cross nodes: always masquerade.
            tx.add_rule(chains.external, f"jump {MARK_MASQ}")
        else:
            if detector is not None:
                # Pod -> external IP is treated as if it went out to the load balancer and back.
                tx.add_rule(chains.external, f"{detector[0]} goto {chains.cluster}", "short-circuit pod traffic")
            # Host traffic has a local source address (maybe the LB IP itself): masquerade it.
            tx.add_rule(chains.external, f"fib saddr type local jump {MARK_MASQ}", "masquerade local traffic")
            tx.add_rule(chains.external, f"fib saddr type local goto {chains.cluster}",
                        "short-circuit local traffic")
        if has_external:
            tx.add_rule(chains.external, f"goto {external_policy_chain}")
    if uses_fw_chain:
        sources: list[str] = []
        allow_from_node = False
        node_ip = ctx.node_ip
        for cidr in sp.load_balancer_source_ranges:
            if sources:
                sources.append(",")
            sources.append(cidr)
            net = parse_cidr_sloppy(cidr)
            allow_from_node = allow_from_node or (node_ip is not None and net is not None
                                                  and node_ip.version == net.version and node_ip in net)
        if allow_from_node:
            # A VIP bound locally loops node -> VIP traffic back with the VIP as source.
            for vip in sp.load_balancer_vips:
                sources += [",", vip]
        tx.add_rule(chains.firewall, f"{ip_x} saddr != {{ {' '.join(sources)} }} drop")
    if affinity:
        for ep in reachable:
            # Affinity is per client IP and service port, whichever service IP was used.
            tx.add_set("set", AFFINITY_PREFIX + ep_chain[ep.endpoint][len(ENDPOINT_PREFIX):], ctx.addr,
                       flags="dynamic,timeout", timeout=sp.sticky_max_age_seconds)
    if uses_cluster_chain:
        _write_dispatch(tx, sp, chains.cluster, cluster, ep_chain, ip_x)
    if uses_local_chain:
        _write_dispatch(tx, sp, chains.local, local, ep_chain, ip_x)
    for ep in reachable:
        chain = ep_chain[ep.endpoint]
        # Hairpin: a pod reaching itself through its Service must be SNATed.
        tx.add_rule(chain, f"{ip_x} saddr {ep.ip} jump {MARK_MASQ}")
        if affinity:
            tx.add_rule(chain, f"update @{AFFINITY_PREFIX}{chain[len(ENDPOINT_PREFIX):]} {{ {ip_x} saddr }}")
        tx.add_rule(chain, f"meta l4proto {proto} dnat to {ep.endpoint}")
    return footprint


def _write_dispatch(tx: _Transaction, sp: ServicePortInfo, chain: str, endpoints: Sequence[EndpointInfo],
                    ep_chain: Mapping[str, str], ip_x: str) -> None:
    """writeServiceToEndpointRules: sticky clients first, then one `numgen random mod N` verdict
    map that sends each new connection to endpoint i with probability 1/N (e.g. the seed's three
    endpoints: `numgen random mod 3 vmap { 0 : goto A , 1 : goto B , 2 : goto C }`, a third each)."""
    if sp.session_affinity_client_ip:
        for ep in endpoints:
            target = ep_chain[ep.endpoint]
            tx.add_rule(chain, f"{ip_x} saddr @{AFFINITY_PREFIX}{target[len(ENDPOINT_PREFIX):]} goto {target}")
    arms = " , ".join(f"{i} : goto {ep_chain[ep.endpoint]}" for i, ep in enumerate(endpoints))
    tx.add_rule(chain, f"numgen random mod {len(endpoints)} vmap {{ {arms} }}")
