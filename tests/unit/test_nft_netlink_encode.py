"""Which transactions proxyagent/nftables/netlink.py sends as a netlink batch, and which it leaves to nft.

A partial sync of every Service of upstream's TestOverallNFTablesRules (ClusterIP, NodePort,
externalIPs, LoadBalancer with eTP Local) encodes line for line, except the one whose
LoadBalancer source ranges write an anonymous interval set (`ip saddr != { ... } drop`), which goes
to nft as text; so do full syncs (the table, base chains and fixed maps), IPv6 and anything not in
render.py's grammar. What the encoded batch leaves in the kernel is compared with nft's in
tests/e2e/test_nft_netlink_batches_netns.py (root, real kernel).
"""

from __future__ import annotations

import pytest
from test_nft_render import UPSTREAM, overall_objects

from proxyagent.nftables import netlink, render_nft
from proxyagent.nftables.render import render_nft_ports
from proxyagent.serviceports import build_endpoints_map, build_service_ports


def partial(key: str) -> str:
    services, slices = overall_objects()
    full = render_nft(services, slices, UPSTREAM)
    ports = build_service_ports(services)
    return render_nft_ports(ports, build_endpoints_map(slices, node_name=UPSTREAM.node_name), UPSTREAM,
                            changed={key}, previous=full).text


@pytest.mark.parametrize("key", ["ns1/svc1", "ns2/svc2", "ns3/svc3", "ns4/svc4"])
def test_a_partial_sync_encodes_line_for_line(key: str) -> None:
    text = partial(key)
    batch = netlink.try_encode(text)
    assert batch is not None
    lines = [line for line in text.splitlines() if line]
    assert set(batch.lines) == set(lines)
    rules = sum(line.startswith("add rule") for line in lines)
    vmaps = sum("vmap" in line for line in lines)
    # One message per line, plus an anonymous map and its elements before each numgen vmap rule.
    assert len(batch.messages) == len(lines) + 2 * vmaps and rules


def test_source_ranges_full_syncs_ipv6_and_other_text_go_to_nft() -> None:
    assert "ip saddr != {" in partial("ns5/svc5")
    assert netlink.try_encode(partial("ns5/svc5")) is None
    services, slices = overall_objects()
    assert netlink.try_encode(render_nft(services, slices, UPSTREAM).text) is None
    for line in ["add rule ip6 kube-proxy c ip6 saddr ::1 jump mark-for-masquerade",
                 "add rule ip other-table c jump x",
                 "add rule ip kube-proxy c ip saddr 10.0.0.0/8 counter jump x",
                 'add rule ip kube-proxy c jump x comment "a\\"b"',
                 "add rule ip kube-proxy c numgen random mod 2 vmap { 0 : goto a }",
                 "add rule ip kube-proxy c meta l4proto tcp dnat to 10.0.0.1:70000",
                 "add element ip kube-proxy cluster-ips { 10.0.0.300 }",
                 "add chain ip kube-proxy c { type nat hook output priority -100 ; }",
                 "flush map ip kube-proxy service-ips"]:
        assert netlink.try_encode(line + "\n") is None, line


def test_message_framing() -> None:
    batch = netlink.encode_batch("add chain ip kube-proxy c\nflush chain ip kube-proxy c\n")
    data, last = netlink.frame(batch, 100)
    assert last == 103  # BATCH_BEGIN 100, two messages, BATCH_END 103
    assert len(data) == batch.size()
    assert [m[0] for m in batch.messages] == [netlink.NFT_MSG_NEWCHAIN, netlink.NFT_MSG_DELRULE]
