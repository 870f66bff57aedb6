"""Real packets through kube-proxy's nftables mode (root): the lab and the traffic tests of
test_proxy_traffic.py (imported, not copied: the same Services, pods and assertions), with node-1
programmed by the NftProxier through the real `nft` instead of iptables-restore. NodePort from the
outside client, ClientIP session affinity, a Service without endpoints rejected, externalTrafficPolicy
Local dropping without a local endpoint and keeping the client's address, masquerading.

Beyond those, what only nftables mode does: traffic to an address of a ServiceCIDR that no Service
holds is dropped, that of a second ServiceCIDR handed to the proxier (OnServiceCIDRsChanged) too, and
traffic to a ClusterIP on a port it does not serve is rejected.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import pytest
from proxyobjects import listed
from test_proxy_traffic import (  # noqa: F401 - the traffic tests run here again, on nftables mode
    CONFIG,
    NODE_1,
    NODE_2,
    SERVICES,
    SLICES,
    Lab,
    connect,
    lab_network,
    test_client_ip_affinity_keeps_a_client_on_one_endpoint,
    test_cluster_ip_spreads_over_every_endpoint,
    test_external_traffic_policy_local_drops_without_a_local_endpoint,
    test_masquerade_only_what_comes_from_outside_the_cluster_cidr,
    test_node_port_on_the_node_ip,
    test_service_without_endpoints_is_rejected,
)

from kubeletstub.netnames import exec_argv
from proxyagent import NftProxier
from proxyagent.nftables.apply import NftApplier

pytestmark = pytest.mark.root

SECOND_CIDR = "10.250.0.0/16"  # a second ServiceCIDR's range, routed to node-1 by the client


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with lab_network(tmp_path_factory, "nft", client_routes={SECOND_CIDR: NODE_1}) as (net, client):
        # node-1 routes the second range on to node-2, which has no route for it and answers "unreachable"
        # at once: only node-1's drop rule can turn that into silence.
        subprocess.run(exec_argv(net.node_netns("node-1"), ["ip", "route", "add", SECOND_CIDR, "via", NODE_2]),
                       check=True)
        proxier = listed(NftProxier(CONFIG, NftApplier(net.node_netns("node-1")), min_sync_period=0),
                         [*SERVICES, *SLICES])
        # What the agent's ServiceCIDR informer hands over: the default `kubernetes` range and a second one.
        proxier.on_service_cidrs_changed(("10.96.0.0/12", SECOND_CIDR))
        assert asyncio.run(proxier.sync_nft()) is not None
        yield Lab(net, "nftables", client)


def test_only_nftables_rules_program_the_node(lab: Lab) -> None:
    table = subprocess.run(exec_argv(lab.node("node-1"), ["nft", "list", "table", "ip", "kube-proxy"]),
                           capture_output=True, text=True, check=True).stdout
    assert "ip daddr { 10.96.0.0/12, 10.250.0.0/16 } drop" in table, table
    for backend in ("iptables-nft-save", "iptables-legacy-save"):
        saved = subprocess.run(exec_argv(lab.node("node-1"), [backend, "-t", "nat"]), capture_output=True,
                               text=True, check=False).stdout
        assert "KUBE-SERVICES" not in saved


def test_unallocated_cluster_ips_are_dropped_and_unserved_ports_rejected(lab: Lab) -> None:
    # An address of a ServiceCIDR that no Service holds: dropped (no answer at all).
    assert connect(lab.client, "10.96.0.200", 80, timeout=2) == "TIMEOUT"
    assert connect(lab.client, "10.250.0.7", 80, timeout=2) == "TIMEOUT"  # without the rule: ENETUNREACH from node-2
    # A ClusterIP that exists, on a port its Service does not serve: rejected at once.
    assert connect(lab.client, "10.96.0.100", 81) == "ECONNREFUSED"
