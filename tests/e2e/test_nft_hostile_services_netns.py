"""Odd but valid Services and EndpointSlices through kube-proxy's nftables mode, with the real `nft` (root).

Everything here is something the API server accepts: names and port names at their longest, the
three protocols on one port number, ports 1 and 65535, NodePorts at both ends of the range, a
Service with 200 endpoints (`numgen random mod 200`) and one with 60 ports, ClientIP affinity at 1 s
and at the 86400 s maximum, 39 LoadBalancer source ranges (padded with spaces, with leading zeros,
an IPv6 one the IPv4 proxier leaves out), externalIPs, Local traffic policies without a local
endpoint, endpoints that are terminating, not ready, or listed in two slices, a named targetPort, an
unnamed port, a dual-stack Service whose first family is IPv6, an ExternalName and a headless
Service (no rules), a LoadBalancer ingress in Proxy mode.

node-1 of the traffic lab (test_proxy_traffic.py's namespaces, pods and healthy Services) is
programmed by the NftProxier through the applier an agent picks (libnftables in a thread inside the
namespace, partial syncs as netlink batches): once with everything in one full sync, once adding
the odd Services one partial sync at a time, changing their endpoints and deleting them. Every sync
must apply, the kernel's table must be what a fresh full sync of the same objects leaves (chains,
rules per chain, map and set elements, as `nft -j list` shows them), and real connections to the
healthy Services and to the odd ones that lead to the lab's pods must be served.

Every namespace is created with a unique name and deleted afterwards, whatever happened.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service
from test_nft_proxier_netns import kernel
from test_proxy_traffic import CONFIG, NODE_1, PODS, SERVICES, SLICES, Lab, curl, lab_network

from kubelab.models import EndpointSlice, Service
from kubeletstub.netnames import exec_argv
from proxyagent import NftProxier
from proxyagent.nftables import apply_transaction, render_nft
from proxyagent.nftables.libnft import nft_applier
from proxyagent.nftables.names import is_affinity_set
from proxyagent.nftproxier import nft_config_of

pytestmark = pytest.mark.root

NS63 = "n" + "-x" * 31  # 63: a namespace name (DNS-1123 label) at its longest
NAME63 = "s" + "-y" * 31  # 63: a Service name (DNS-1035 label) at its longest
PORT15 = "a-b-c-d-e-f-g-h"  # 15: a port name (IANA_SVC_NAME) at its longest
LOCAL = ("web-a", "web-b")  # node-1's pods
LAB = [ep(PODS[p][1], PODS[p][0]) for p in ("web-a", "web-b", "web-c")]


def pods(*names: str, **conditions: bool) -> list[dict[str, Any]]:
    return [ep(PODS[p][1], PODS[p][0], **conditions) for p in names]


def far(count: int, *, third: int = 3) -> list[dict[str, Any]]:
    """`count` endpoints on nodes that carry no pods of the lab (never connected to)."""
    return [ep(f"10.244.{third + i // 250}.{i % 250 + 2}", "node-9") for i in range(count)]


RANGES = [f"172.{16 + i // 16}.{(i % 16) * 16}.0/20" for i in range(36)] + [
    " 10.240.0.0/24 ", "010.002.000.000/16", "2001:db8::/32"]

# (Service, its EndpointSlices). Cluster IPs in 10.96.1.0/24; NodePorts away from the healthy ones.
ODD: list[tuple[Service, list[EndpointSlice]]] = [
    (service(NS63, NAME63, cluster_ip="10.96.1.1", ports=[port(PORT15, 65535, targetPort=5000)]),
     [endpoint_slice(NS63, NAME63, LAB, [port(PORT15, 5000)])]),
    (service("default", "every-protocol", cluster_ip="10.96.1.2",
             ports=[port("dns-tcp", 53, "TCP", targetPort=5000), port("dns-udp", 53, "UDP", targetPort=5353),
                    port("dns-sctp", 53, "SCTP", targetPort=5353)]),
     [endpoint_slice("default", "every-protocol", LAB,
                     [port("dns-tcp", 5000, "TCP"), port("dns-udp", 5353, "UDP"), port("dns-sctp", 5353, "SCTP")])]),
    (service("default", "edges", cluster_ip="10.96.1.3", svc_type="NodePort",
             ports=[port("low", 1, targetPort=5000, nodePort=30000), port("high", 65535, targetPort=65535,
                                                                         nodePort=32767)]),
     [endpoint_slice("default", "edges", pods("web-a"), [port("low", 5000), port("high", 65535)])]),
    (service("default", "crowd", cluster_ip="10.96.1.4", ports=[port("http", 80, targetPort=5000)]),
     [endpoint_slice("default", "crowd", far(100), [port("http", 5000)], name="crowd-1"),
      endpoint_slice("default", "crowd", far(100, third=5), [port("http", 5000)], name="crowd-2")]),
    (service("default", "many-ports", cluster_ip="10.96.1.5",
             ports=[port(f"p{i}", 1000 + i, targetPort=2000 + i) for i in range(60)]),
     [endpoint_slice("default", "many-ports", far(3), [port(f"p{i}", 2000 + i) for i in range(60)])]),
    (service("default", "brief", cluster_ip="10.96.1.6", ports=[port("http", 80, targetPort=5000)],
             sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 1}}),
     [endpoint_slice("default", "brief", LAB, [port("http", 5000)])]),
    (service("default", "day-long", cluster_ip="10.96.1.7", ports=[port("http", 80, targetPort=5000)],
             sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 86400}}),
     [endpoint_slice("default", "day-long", LAB, [port("http", 5000)])]),
    (service("default", "fenced", cluster_ip="10.96.1.8", svc_type="LoadBalancer",
             ports=[port("http", 80, targetPort=5000, nodePort=31008)], loadBalancerSourceRanges=RANGES,
             externalIPs=["192.0.2.20", "192.0.2.21"], ingress=[{"ip": "192.0.2.10"}]),
     [endpoint_slice("default", "fenced", LAB, [port("http", 5000)])]),
    (service("default", "local-only", cluster_ip="10.96.1.9", svc_type="LoadBalancer",
             ports=[port("http", 80, targetPort=5000, nodePort=31009)], externalTrafficPolicy="Local",
             internalTrafficPolicy="Local", healthCheckNodePort=32009,
             ingress=[{"ip": "192.0.2.30"}, {"ip": "192.0.2.31", "ipMode": "Proxy"}]),
     [endpoint_slice("default", "local-only", pods("web-c"), [port("http", 5000)])]),
    (service("default", "in-flux", cluster_ip="10.96.1.10", ports=[port("http", 80, targetPort=5000)]),
     [endpoint_slice("default", "in-flux", [*pods("web-a", ready=False, serving=True, terminating=True),
                                            *pods("web-b", ready=False, serving=False, terminating=False),
                                            ep("10.244.3.77")], [port("http", 5000)], name="in-flux-1"),
      endpoint_slice("default", "in-flux", [*pods("web-a"), *pods("web-c")], [port("http", 5000)],
                     name="in-flux-2")]),
    (service("default", "by-name", cluster_ip="10.96.1.11", ports=[port("http", 80, targetPort="web")]),
     [endpoint_slice("default", "by-name", pods(*LOCAL), [port("http", 5000)])]),
    (service("default", "nameless", cluster_ip="10.96.1.12", ports=[port("", 80, targetPort=5000)]),
     [endpoint_slice("default", "nameless", LAB, [port("", 5000)])]),
    (service("default", "six-first", cluster_ip="fd00::c", clusterIPs=["fd00::c", "10.96.1.13"],
             ipFamilies=["IPv6", "IPv4"], ipFamilyPolicy="RequireDualStack", ports=[port("http", 80, targetPort=5000)]),
     [endpoint_slice("default", "six-first", LAB, [port("http", 5000)])]),
    (service("default", "alias", cluster_ip="", svc_type="ExternalName", externalName="example.invalid",
             ports=[port("http", 80)]), []),
    (service("default", "headless", cluster_ip="None", ports=[port("http", 80, targetPort=5000)]),
     [endpoint_slice("default", "headless", LAB, [port("http", 5000)])]),
]


def all_objects(odd: list[tuple[Service, list[EndpointSlice]]]) -> tuple[list[Service], list[EndpointSlice]]:
    return [*SERVICES, *(s for s, _ in odd)], [*SLICES, *(es for _, slices in odd for es in slices)]


def fresh(services: list[Service], slices: list[EndpointSlice]) -> tuple[dict[str, int], dict[str, set[str]]]:
    """What a fresh full sync of these objects leaves, in test_nft_proxier_netns.kernel's view."""
    table = apply_transaction(None, render_nft(services, slices, nft_config_of(CONFIG)).text)
    assert table is not None
    return ({name: len(chain.rules) for name, chain in table.chains.items()},
            {name: set(s.elements) for name, s in table.sets.items()})


def programmed(netns: str) -> tuple[dict[str, int], dict[str, set[str]]]:
    """The kernel's table as kernel() shows it, less the affinity sets' elements: those are the
    clients the traffic checks' connections left there, not anything a sync wrote."""
    chains, sets = kernel(netns)
    return chains, {name: set() if is_affinity_set(name) else elements for name, elements in sets.items()}


def served_by(lab: Lab, netns: str, url: str, tries: int = 24) -> Counter[str]:
    replies = [curl(netns, url, max_time=30) for _ in range(tries)]  # generous: a loaded machine is slow
    assert {r.code for r in replies} == {0}, [r.error for r in replies if r.code]
    return Counter(r.pod for r in replies)


def check_traffic(lab: Lab) -> None:
    """The healthy Services, and the odd ones whose endpoints are the lab's pods, serve real connections."""
    node = lab.node("node-1")
    assert set(served_by(lab, node, "http://10.96.0.100/")) == {"web-a", "web-b", "web-c"}
    assert set(served_by(lab, lab.client, f"http://{NODE_1}:30080/")) == {"web-a", "web-b", "web-c"}
    assert len(served_by(lab, lab.client, "http://10.96.0.101/", tries=8)) == 1  # affinity still holds
    assert set(served_by(lab, node, "http://10.96.1.1:65535/")) == {"web-a", "web-b", "web-c"}
    assert set(served_by(lab, node, "http://10.96.1.2:53/")) == {"web-a", "web-b", "web-c"}
    assert set(served_by(lab, lab.client, f"http://{NODE_1}:30000/", tries=4)) == {"web-a"}
    assert set(served_by(lab, node, "http://10.96.1.11/")) == {"web-a", "web-b"}  # named targetPort
    assert set(served_by(lab, node, "http://10.96.1.12/")) == {"web-a", "web-b", "web-c"}  # unnamed port
    assert set(served_by(lab, node, "http://10.96.1.13/")) == {"web-a", "web-b", "web-c"}  # IPv4 of dual-stack
    # The source range "10.240.0.0/24" (with its spaces) lets the client through the LoadBalancer IP.
    assert set(served_by(lab, lab.client, "http://192.0.2.10/", tries=12)) <= {"web-a", "web-b", "web-c"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with lab_network(tmp_path_factory, "nft", client_routes={"192.0.2.0/24": NODE_1}) as (net, client):
        yield Lab(net, "nftables", client)


def flush(lab: Lab) -> None:
    """Back to an empty node-1 (the tests program it from scratch, each its own way)."""
    subprocess.run(exec_argv(lab.node("node-1"), ["nft", "delete", "table", "ip", "kube-proxy"]),
                   capture_output=True, check=False)


async def test_one_full_sync_of_every_odd_service_applies_and_serves(lab: Lab) -> None:
    flush(lab)
    services, slices = all_objects(ODD)
    applier = nft_applier(lab.node("node-1"))
    try:
        proxier = listed(NftProxier(CONFIG, applier, min_sync_period=0), [*services, *slices])
        await proxier.sync_proxy_rules()
        assert proxier.failures == 0 and proxier.last_nft is not None and proxier.last_nft.full_sync
        assert kernel(lab.node("node-1")) == fresh(services, slices)
        listing = await applier.listed()
        assert "numgen random mod 200 vmap" in listing  # crowd: both slices' endpoints
        assert "timeout 1s" in listing and "timeout 1d" in listing  # the affinity sets
        assert "fd00::c" not in listing and "2001:db8" not in listing  # the IPv6 proxier's, not this one's
        assert proxier.screen.skipped == {}  # nothing odd enough to leave out
        check_traffic(lab)
    finally:
        applier.close()


async def test_odd_services_one_partial_sync_at_a_time(lab: Lab) -> None:
    from proxytimer import FakeTimer  # the proxier's monotonic time, moved by the test

    flush(lab)
    timer = FakeTimer(start=1000.0)
    applier = nft_applier(lab.node("node-1"))
    try:
        proxier = listed(NftProxier(CONFIG, applier, min_sync_period=0, timer=timer), [*SERVICES, *SLICES])
        await proxier.sync_proxy_rules()
        assert proxier.last_nft is not None and proxier.last_nft.full_sync
        for done, (svc, slices) in enumerate(ODD, start=1):
            proxier.on_service("ADDED", None, svc)
            for es in slices:
                proxier.on_slice("ADDED", None, es)
            await proxier.sync_proxy_rules()
            assert proxier.failures == 0, f"adding {svc.metadata.name}: see the log"
            assert proxier.last_nft is not None and not proxier.last_nft.full_sync
            assert programmed(lab.node("node-1")) == fresh(*all_objects(ODD[:done])), svc.metadata.name
        # Through netlink batches, as a running agent sends them (all but what only the library takes).
        assert getattr(applier, "netlink_transactions", 1) > 0
        check_traffic(lab)

        # Every odd Service's endpoints change at once (web-b leaves each slice that had it): one sync.
        for _, slices in ODD:
            for es in slices:
                kept = [e for e in es.to_dict()["endpoints"] if e["addresses"] != [PODS["web-b"][1]]]
                if len(kept) != len(es.endpoints or []):
                    proxier.on_slice("MODIFIED", es, endpoint_slice(
                        es.metadata.namespace, es.metadata.labels["kubernetes.io/service-name"], kept,
                        es.to_dict()["ports"], name=es.metadata.name))
        await proxier.sync_proxy_rules()
        assert proxier.failures == 0 and proxier.last_nft is not None and proxier.last_nft.stale_chains
        assert set(served_by(lab, lab.node("node-1"), "http://10.96.1.1:65535/")) == {"web-a", "web-c"}

        # All of them go; a second later the flushed chains are deleted and only the healthy rules are left.
        for svc, slices in ODD:
            proxier.on_service("DELETED", svc, None)
            for es in slices:
                proxier.on_slice("DELETED", es, None)
        await proxier.sync_proxy_rules()
        timer.t += 1.0
        await proxier.sync_proxy_rules()
        assert proxier.failures == 0
        assert programmed(lab.node("node-1")) == fresh(list(SERVICES), list(SLICES))
        assert set(served_by(lab, lab.node("node-1"), "http://10.96.0.100/")) == {"web-a", "web-b", "web-c"}
        assert curl(lab.client, "http://10.96.1.1:65535/", max_time=2).code != 0  # gone
    finally:
        applier.close()
