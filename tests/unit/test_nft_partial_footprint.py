"""A partial nftables sync that walks only the changed Services (render_nft_ports' `previous`) writes
exactly what the walk of every port writes, whatever the sequence of changes.

The walk of every port is kube-proxy's syncProxyRules (every port's elements are ensured, only the
changed Services' chains rewritten); the proportional one starts from the last sync's per-Service
footprints. When two Services claim one map key (an invalid configuration kube-proxy tolerates),
the walk rewrites that key in every sync and the proportional render does not: there the table
after the transaction is compared, not the text. A seeded sequence of random changes (endpoints added, moved, removed, made local or
not ready; Services deleted and re-created) over TestOverallNFTablesRules' six Services plus two
that share an external IP and port with them (the case where the proportional render must give up
and walk every port), with Service specs changing too (affinity on and off, NodePorts moved, Local
policies, external IPs), compares the two after every step: transaction text, the tracked maps, the
active chains and affinity sets, stale chains and the counts the metrics report. Stale chains are
deleted two steps after they were first flushed, as the proxier deletes them a second later, and the
table the transactions build must match the bookkeeping the next proportional sync starts from.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest
from proxyobjects import ep, listed, port
from proxytimer import FakeTimer
from test_nft_render import UPSTREAM, eps, overall_objects, svc

from kubelab.models import EndpointSlice, Service
from proxyagent import ProxyConfig
from proxyagent.nftables import NftTable, apply_transaction
from proxyagent.nftables.apply import RecordingNftApplier
from proxyagent.nftables.names import is_affinity_set, is_service_chain
from proxyagent.nftables.render import TRACKED, NftRuleset, SupersededError, render_nft_ports
from proxyagent.nftproxier import NftProxier
from proxyagent.serviceports import ServicePortInfo, build_endpoints_map, build_service_ports

NODE = UPSTREAM.node_name


def population() -> tuple[dict[str, Service], dict[str, EndpointSlice], dict[str, list[Service]]]:
    """The Services, their slices, and for each Service the specs a change may give it."""
    services, slices = overall_objects()
    # ns7/svc7 shares svc4's external IP and port (192.168.99.33:80); ns8/svc8 is a plain one.
    services += [svc("ns7", "svc7", "172.30.0.47", svc_type="NodePort", externalIPs=["192.168.99.33"],
                     ports=[port("p80", 80, nodePort=3007)]),
                 svc("ns8", "svc8", "172.30.0.48", ports=[port("p80", 80), port("p443", 443)])]
    variants = {s.key: [s] for s in services}
    affinity = {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 300}}}
    # Affinity switched on and off, a NodePort moved or added, policies made Local, an external IP added.
    variants["ns1/svc1"].append(svc("ns1", "svc1", "172.30.0.41", svc_type="NodePort",
                                    ports=[port("p80", 80, nodePort=3011)], **affinity))
    variants["ns3/svc3"].append(svc("ns3", "svc3", "172.30.0.43", svc_type="NodePort", internalTrafficPolicy="Local",
                                    externalTrafficPolicy="Local", ports=[port("p80", 80, nodePort=3013)]))
    variants["ns5/svc5"].append(svc("ns5", "svc5", "172.30.0.45", svc_type="LoadBalancer",
                                    ports=[port("p80", 80, nodePort=3002)], ingress=[{"ip": "5.6.7.8"}]))
    variants["ns8/svc8"].append(svc("ns8", "svc8", "172.30.0.48", externalIPs=["192.168.99.88"],
                                    ports=[port("p80", 80), port("p443", 443)], **affinity))
    return ({s.key: s for s in services},
            {s.key.split("/")[0] + "/" + s.metadata.labels["kubernetes.io/service-name"]: s for s in slices}, variants)


def random_slice(rng: random.Random, key: str) -> EndpointSlice | None:
    ns, name = key.split("/")
    count = rng.choice([0, 1, 2, 3])
    if count == 0 and rng.random() < 0.5:
        return None
    endpoints = []
    for ip in rng.sample([f"10.180.{ns[-1]}.{i}" for i in range(1, 7)], count):
        conditions = {"ready": False} if rng.random() < 0.15 else {}
        endpoints.append(ep(ip, NODE if rng.random() < 0.4 else None, **conditions))
    ports = [port("p80", 80), port("p443", 443)] if name == "svc8" else None
    return eps(ns, name, endpoints, ports)


def summary(ruleset: NftRuleset) -> tuple[object, ...]:
    """Everything a sync's result says: its text first."""
    return (ruleset.text, ruleset.elements, ruleset.active_chains, ruleset.active_affinity_sets,
            ruleset.stale_chains, ruleset.service_ports, ruleset.services_written, ruleset.endpoints_total,
            ruleset.no_local_endpoints_internal, ruleset.no_local_endpoints_external,
            ruleset.health_check_node_ports)


def service_chains(table: NftTable) -> set[str]:
    return {c for c in table.chains if is_service_chain(c)}


@pytest.mark.parametrize("seed", range(6))
def test_proportional_partial_sync_writes_what_the_walk_of_every_port_writes(seed: int) -> None:
    """Each step: the walk sees the whole table (kube-proxy lists its chains); the proportional render
    sees only `previous` and the stale chains not deleted yet, which are deleted two steps after
    they were first flushed (kube-proxy's second), as the nftables proxier does."""
    rng = random.Random(seed)
    services, slices, variants = population()
    ports = build_service_ports(services.values())
    previous = render_nft_ports(ports, build_endpoints_map(slices.values(), node_name=NODE), UPSTREAM)
    table: NftTable = apply_transaction(None, previous.text)
    stale: dict[str, int] = {}  # chain -> the step that first flushed it
    walked = proportional = deleted = revived = 0
    for step in range(60):
        changed = set(rng.sample(sorted(variants), rng.choice([1, 1, 1, 2, 3])))
        for key in sorted(changed):  # the same draws whatever the string hash seed
            if rng.random() < 0.15:
                services.pop(key, None)
            else:
                services[key] = rng.choice(variants[key])
            new_slice = random_slice(rng, key)
            if new_slice is None:
                slices.pop(key, None)
            else:
                slices[key] = new_slice
        ports = build_service_ports(services.values())
        endpoints = build_endpoints_map(slices.values(), node_name=NODE)
        deleting = {c for c, since in stale.items() if step - since >= 2}
        existing = frozenset(table.chains) - deleting
        sets = frozenset(name for name, s in table.sets.items() if s.kind == "set")
        walk = render_nft_ports(ports, endpoints, UPSTREAM, changed=changed, previous_elements=previous.elements,
                                existing_chains=existing, existing_sets=sets)
        calls: list[int] = []

        def every_port(ports: Sequence[ServicePortInfo] = ports, calls: list[int] = calls) -> Sequence[ServicePortInfo]:
            calls.append(1)
            return ports

        shared = bool(previous.shared_keys)
        fast = render_nft_ports(every_port, endpoints, UPSTREAM, changed=changed, previous=previous,
                                changed_ports=[sp for sp in ports if sp.service_key in changed],
                                stale_chains={c for c in stale if c not in deleting})
        if not calls:  # it took previous' bookkeeping over (the walk builds its own)
            assert previous.superseded
            with pytest.raises(SupersededError):
                previous.elements  # noqa: B018 - the read must fail, not show the new sync's state
        if shared:
            # The walk rewrites a key two Services claim (each in turn, the last one winning) in
            # every sync; the proportional render leaves it as the last walk left it: same table.
            assert summary(fast)[1:] == summary(walk)[1:]
            assert apply_transaction(table, fast.text).dump() == apply_transaction(table, walk.text).dump()
        else:
            assert summary(fast) == summary(walk)
        walked += bool(calls)
        proportional += not calls
        # The proxier's bookkeeping: a chain due for deletion that a Service uses again is kept.
        revived += len(deleting & fast.active_chains)
        deleting -= fast.active_chains
        deleted += len(deleting)
        # nft's rules (the model) accept the transaction and the deletes (no map element or rule
        # still jumps to a deleted chain).
        table = apply_transaction(table, fast.text + "".join(f"delete chain ip kube-proxy {c}\n"
                                                             for c in sorted(deleting)))
        for chain in deleting | (set(stale) & fast.active_chains):
            stale.pop(chain, None)
        for chain in fast.stale_chains:
            stale.setdefault(chain, step)
        # What the next proportional sync assumes of the table holds: its per-service chains are the
        # active ones plus the stale ones (empty), its affinity sets the active ones, its tracked
        # maps the bookkeeping's elements.
        assert service_chains(table) == set(fast.active_chains) | set(stale)
        assert all(not table.chains[c].rules for c in stale)
        assert {s for s in table.sets if is_affinity_set(s)} == set(fast.active_affinity_sets)
        assert {name: set(table.sets[name].elements) for name, _ in TRACKED} == \
            {name: set(fast.elements[name]) for name, _ in TRACKED}
        previous = fast
    # Both paths ran: ns4/svc4 and ns7/svc7 write the key 192.168.99.33 . tcp . 80 of one map at times;
    # stale chains were deleted later, and some revived first.
    assert walked and proportional and deleted and revived


def test_the_proportional_partial_sync_never_walks_the_other_ports() -> None:
    """A one-Service change among many walks that Service's ports only (svc_ports is never called)."""
    services = [svc("bench", f"svc-{i}", f"172.30.{i // 250}.{i % 250 + 1}", ports=[port("p80", 80)])
                for i in range(300)]
    slices = [eps("bench", f"svc-{i}", [ep(f"10.1.{i // 250}.{i % 250 + 1}")]) for i in range(300)]
    ports = build_service_ports(services)
    full = render_nft_ports(ports, build_endpoints_map(slices, node_name=NODE), UPSTREAM)
    slices[7] = eps("bench", "svc-7", [ep("10.9.9.9"), ep("10.9.9.10")])

    def every_port() -> Sequence[ServicePortInfo]:
        raise AssertionError("the proportional render walked every port")

    partial = render_nft_ports(every_port, build_endpoints_map(slices, node_name=NODE), UPSTREAM,
                               changed={"bench/svc-7"}, previous=full.snapshot(),
                               changed_ports=[sp for sp in ports if sp.service_key == "bench/svc-7"])
    assert partial.services_written == 1 and partial.service_ports == 300
    assert "10.9.9.10" in partial.text and "svc-8" not in partial.text
    assert apply_transaction(apply_transaction(None, full.text), partial.text).chains


def _uncommented(table: NftTable) -> str:
    return re.sub(r'(add element .*) comment "[^"]*"', r"\1", table.dump())


def _elements_of(table: NftTable) -> dict[str, dict[str, str]]:
    """The tracked maps as the table holds them: key -> verdict ("" for a set's)."""
    return {name: {key: tail.rsplit(" : ", 1)[1] if " : " in tail else "" for key, tail in table.sets[name].elements.items()}
            for name, _ in TRACKED}


@pytest.mark.parametrize("seed", range(3))
async def test_the_proxier_writes_on_the_table_it_finds_what_the_walk_writes(seed: int) -> None:
    """NftProxier's own bookkeeping (the stale chains it remembers, when it deletes them, the ruleset it
    hands to the next sync) through random events and clock steps: every partial transaction is the walk
    of every port on the table the sync found, plus the deletes of chains stale for a second; and the
    table then is a fresh full sync's plus the stale chains, empty."""
    rng = random.Random(seed)
    services, slices, variants = population()
    timer = FakeTimer()
    applier = RecordingNftApplier()
    config = ProxyConfig(node_name=NODE, node_ips=UPSTREAM.node_ips, cluster_cidr=UPSTREAM.cluster_cidr,
                         nodeport_addresses=UPSTREAM.nodeport_addresses)
    proxier = listed(NftProxier(config, applier, timer=timer), [*services.values(), *slices.values()])
    await proxier.sync_proxy_rules()
    assert proxier.last_nft is not None and proxier.last_nft.full_sync
    flushed: dict[str, float] = {}  # stale chain -> when a sync first flushed it
    deleted_total = kept_stale = identical = 0
    ever_shared = False
    for _ in range(50):
        for key in sorted(rng.sample(sorted(variants), rng.choice([1, 1, 2, 3]))):
            old = services.get(key)
            if rng.random() < 0.15:
                services.pop(key, None)
                proxier.on_service("DELETED", old, None)
            else:
                services[key] = rng.choice(variants[key])
                proxier.on_service("MODIFIED" if old else "ADDED", old, services[key])
            old_slice, new_slice = slices.get(key), random_slice(rng, key)
            if new_slice is None:
                slices.pop(key, None)
                proxier.on_slice("DELETED", old_slice, None)
            else:
                slices[key] = new_slice
                proxier.on_slice("MODIFIED" if old_slice else "ADDED", old_slice, new_slice)
        timer.t += rng.choice([0.0, 0.4, 0.7, 1.3])
        before = applier.table
        assert before is not None
        await proxier.sync_proxy_rules()
        nft, after = proxier.last_nft, applier.table
        assert nft is not None and not nft.full_sync and after is not None and after is not before
        deleted = sorted(set(before.chains) - set(after.chains))
        assert all(timer.t - flushed[c] >= 1.0 for c in deleted)
        walk = render_nft_ports(build_service_ports(services.values()),
                                build_endpoints_map(slices.values(), node_name=NODE), proxier.nft_config,
                                changed=proxier.last_changes, previous_elements=_elements_of(before),
                                existing_chains=frozenset(before.chains) - set(deleted),
                                existing_sets=frozenset(n for n, s in before.sets.items() if s.kind == "set"))
        deletes = "".join(f"delete chain ip kube-proxy {c}\n" for c in deleted)
        if walk.shared_keys:  # ns4/svc4 and ns7/svc7 on one key: the walk rewrites it (see above)
            assert apply_transaction(before, walk.text + deletes).dump() == after.dump()
        else:
            assert applier.last_transaction == walk.text + deletes
            identical += 1
        for chain in [*deleted, *(c for c in flushed if c in nft.active_chains)]:
            flushed.pop(chain, None)
        for chain in nft.stale_chains:
            flushed.setdefault(chain, timer.t)
        deleted_total += len(deleted)
        kept_stale += len(flushed)
        pending = service_chains(after) - set(nft.active_chains)
        assert pending == set(flushed) and all(not after.chains[c].rules for c in pending)
        fresh = apply_transaction(None, render_nft_ports(
            build_service_ports(services.values()), build_endpoints_map(slices.values(), node_name=NODE),
            proxier.nft_config).text)
        trimmed = apply_transaction(after, "".join(f"delete chain ip kube-proxy {c}\n" for c in sorted(pending)))
        ever_shared = ever_shared or bool(walk.shared_keys)
        if ever_shared:  # an element two Services wrote keeps the first one's comment (nft's too)
            assert _uncommented(trimmed) == _uncommented(fresh)
        else:
            assert trimmed.dump() == fresh.dump()
    assert deleted_total and kept_stale and identical
