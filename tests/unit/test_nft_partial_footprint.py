"""A partial nftables sync that walks only the changed Services (render_nft_ports' `previous`) writes
exactly what the walk of every port writes, whatever the sequence of changes.

The walk of every port is kube-proxy's syncProxyRules (every port's elements are ensured, only the
changed Services' chains rewritten); the proportional one starts from the last sync's per-Service
footprints. When two Services claim one map key (an invalid configuration kube-proxy tolerates),
the walk rewrites that key in every sync and the proportional render does not: there the table
after the transaction is compared, not the text. A seeded sequence of random changes (endpoints added, moved, removed, made local or
not ready; Services deleted and re-created) over TestOverallNFTablesRules' six Services plus two
that share an external IP and port with them (the case where the proportional render must give up
and walk every port) compares the two after every step: transaction text, the tracked maps, the
active chains and affinity sets, stale chains and the counts the metrics report.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from proxyobjects import ep, port
from test_nft_render import UPSTREAM, eps, overall_objects, svc

from kubelab.models import EndpointSlice, Service
from proxyagent.nftables import NftTable, apply_transaction
from proxyagent.nftables.render import NftRuleset, render_nft_ports
from proxyagent.serviceports import ServicePortInfo, build_endpoints_map, build_service_ports

NODE = UPSTREAM.node_name


def population() -> tuple[dict[str, Service], dict[str, EndpointSlice]]:
    services, slices = overall_objects()
    # ns7/svc7 shares svc4's external IP and port (192.168.99.33:80); ns8/svc8 is a plain one.
    services += [svc("ns7", "svc7", "172.30.0.47", svc_type="NodePort", externalIPs=["192.168.99.33"],
                     ports=[port("p80", 80, nodePort=3007)]),
                 svc("ns8", "svc8", "172.30.0.48", ports=[port("p80", 80), port("p443", 443)])]
    return ({s.key: s for s in services},
            {s.key.split("/")[0] + "/" + s.metadata.labels["kubernetes.io/service-name"]: s for s in slices})


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


@pytest.mark.parametrize("seed", range(6))
def test_proportional_partial_sync_writes_what_the_walk_of_every_port_writes(seed: int) -> None:
    rng = random.Random(seed)
    services, slices = population()
    ports = build_service_ports(services.values())
    previous = render_nft_ports(ports, build_endpoints_map(slices.values(), node_name=NODE), UPSTREAM)
    table: NftTable = apply_transaction(None, previous.text)
    originals = dict(services)
    walked = proportional = 0
    for _ in range(40):
        changed = set(rng.sample(sorted(originals), rng.choice([1, 1, 1, 2, 3])))
        for key in sorted(changed):  # the same draws whatever the string hash seed
            if rng.random() < 0.15:
                services.pop(key, None)
            else:
                services[key] = originals[key]
            new_slice = random_slice(rng, key)
            if new_slice is None:
                slices.pop(key, None)
            else:
                slices[key] = new_slice
        ports = build_service_ports(services.values())
        endpoints = build_endpoints_map(slices.values(), node_name=NODE)
        existing = frozenset(table.chains)
        sets = frozenset(name for name, s in table.sets.items() if s.kind == "set")
        walk = render_nft_ports(ports, endpoints, UPSTREAM, changed=changed, previous_elements=previous.elements,
                                existing_chains=existing, existing_sets=sets)
        calls: list[int] = []

        def every_port(ports: Sequence[ServicePortInfo] = ports, calls: list[int] = calls) -> Sequence[ServicePortInfo]:
            calls.append(1)
            return ports

        fast = render_nft_ports(every_port, endpoints, UPSTREAM, changed=changed, previous=previous,
                                changed_ports=[sp for sp in ports if sp.service_key in changed],
                                existing_chains=existing, existing_sets=sets)
        if previous.shared_keys:
            # The walk rewrites a key two Services claim (each in turn, the last one winning) in
            # every sync; the proportional render leaves it as the last walk left it: same table.
            assert summary(fast)[1:] == summary(walk)[1:]
            assert apply_transaction(table, fast.text).dump() == apply_transaction(table, walk.text).dump()
        else:
            assert summary(fast) == summary(walk)
        walked += bool(calls)
        proportional += not calls
        table = apply_transaction(table, fast.text)  # nft's rules (the model) accept it
        previous = fast
    # Both paths ran: ns4/svc4 and ns7/svc7 write the key 192.168.99.33 . tcp . 80 of one map at times.
    assert walked and proportional


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
                               changed={"bench/svc-7"}, previous=full,
                               changed_ports=[sp for sp in ports if sp.service_key == "bench/svc-7"],
                               existing_chains=full.active_chains)
    assert partial.services_written == 1 and partial.service_ports == 300
    assert "10.9.9.10" in partial.text and "svc-8" not in partial.text
    assert apply_transaction(apply_transaction(None, full.text), partial.text).chains
