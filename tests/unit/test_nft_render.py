"""Golden tests of kube-proxy's nftables transactions (proxyagent/nftables).

Compared as upstream's proxier_test.go compares them (assertNFTablesTransactionEqual over
knftables.Fake): both the expected text and the rendered transaction are applied to an empty table
and the resulting tables compared, chains with their rules in order, sets and maps as sets of
elements. Cases named "(upstream ...)" feed the inputs of that upstream test and expect its text,
with three deliberate differences, all of them kube-proxy 1.33 (the release kubelab follows):
* the mark: upstream's fake proxier sets the literal "0x4000", kube-proxy proper prints
  fmt.Sprintf("%#08x", 1<<14) = 0x00004000;
* the base chains: 1.33 hooks filter-prerouting/-input/-forward/-output at priority dstnat-10 (-110)
  and filter-output-post-dnat at dstnat+10 (-90); later releases renamed and moved them
  (filter-prerouting-pre-dnat, filter at 0), so the base part below is 1.33's setupNFTables;
* the ClusterIP masquerade rule matches "tcp dport 80" after the ClusterIP, as 1.33 writes it
  (later releases dropped the port match).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from proxyobjects import ep, port, service, service_dict, slice_dict

from kubelab.models import EndpointSlice, Service
from proxyagent.nftables import NftConfig, TableError, apply_transaction, render_nft
from proxyagent.nftables.names import endpoint_base, hash_and_truncate, service_port_chains

NODE = "test-node"
# Upstream's NewFakeProxier: pod CIDR 10.0.0.0/8, node IP 192.168.0.2, --nodeport-addresses
# 192.168.0.2/32 (and an IPv6 /128), ServiceCIDR 172.30.0.0/16.
UPSTREAM = NftConfig(node_name=NODE, node_ips=("192.168.0.2", "192.168.1.2", "192.168.99.11"),
                     cluster_cidr="10.0.0.0/8", nodeport_addresses=("192.168.0.2/32", "2001:db8::1/128"),
                     service_cidrs=("172.30.0.0/16",))


def golden(text: str) -> str:
    # Upstream's fake mark -> kube-proxy's real one (module docstring).
    return textwrap.dedent(text).replace("0x4000", "0x00004000")


def table_of(text: str, family: str = "ip", *, dump: bool = False) -> str:
    return apply_transaction(None, text, family=family, check_references=not dump).dump()


def assert_same_table(expected: str, rendered: str, family: str = "ip") -> None:
    """The expected text is a table dump (references before definitions); the rendered one must be a
    transaction nft accepts in order."""
    assert table_of(rendered, family) == table_of(expected, family, dump=True)


BASE_RULES = golden("""
    add table ip kube-proxy { comment "rules for kube-proxy" ; }

    add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
    add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }

    add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
    add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
    add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
    add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
    add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }

    add chain ip kube-proxy cluster-ips-check
    add chain ip kube-proxy filter-prerouting { type filter hook prerouting priority -110 ; }
    add chain ip kube-proxy filter-forward { type filter hook forward priority -110 ; }
    add chain ip kube-proxy filter-input { type filter hook input priority -110 ; }
    add chain ip kube-proxy filter-output { type filter hook output priority -110 ; }
    add chain ip kube-proxy filter-output-post-dnat { type filter hook output priority -90 ; }
    add chain ip kube-proxy firewall-check
    add chain ip kube-proxy mark-for-masquerade
    add chain ip kube-proxy masquerading
    add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
    add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
    add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
    add chain ip kube-proxy nodeport-endpoints-check
    add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
    add chain ip kube-proxy services
    add chain ip kube-proxy service-endpoints-check

    add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
    add rule ip kube-proxy cluster-ips-check ip daddr { 172.30.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"
    add rule ip kube-proxy filter-prerouting ct state new jump firewall-check
    add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
    add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
    add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
    add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
    add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
    add rule ip kube-proxy filter-output ct state new jump firewall-check
    add rule ip kube-proxy filter-output-post-dnat ct state new jump cluster-ips-check
    add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
    add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
    add rule ip kube-proxy masquerading mark and 0x4000 == 0 return
    add rule ip kube-proxy masquerading mark set mark xor 0x4000
    add rule ip kube-proxy masquerading masquerade fully-random
    add rule ip kube-proxy nat-output jump services
    add rule ip kube-proxy nat-postrouting jump masquerading
    add rule ip kube-proxy nat-prerouting jump services
    add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
    add rule ip kube-proxy reject-chain reject
    add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
    add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports

    add element ip kube-proxy nodeport-ips { 192.168.0.2 }
    add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
    """)

P80 = port("p80", 80)


def svc(ns: str, name: str, cluster_ip: str, **kw: Any) -> Service:
    return service(ns, name, cluster_ip=cluster_ip, **kw)


def eps(ns: str, name: str, endpoints: list[dict[str, Any]], ports: list[dict[str, Any]] | None = None,
        **kw: Any) -> EndpointSlice:
    return EndpointSlice.model_validate(slice_dict(ns, name, endpoints, ports or [P80], **kw))


def overall_objects() -> tuple[list[Service], list[EndpointSlice]]:
    """TestOverallNFTablesRules' six Services and their endpoints."""
    services = [
        svc("ns1", "svc1", "172.30.0.41", ports=[P80]),
        svc("ns2", "svc2", "172.30.0.42", svc_type="LoadBalancer", externalTrafficPolicy="Local",
            ports=[port("p80", 80, nodePort=3001)], ingress=[{"ip": "1.2.3.4"}], externalIPs=["192.168.99.22"],
            healthCheckNodePort=30000),
        svc("ns3", "svc3", "172.30.0.43", svc_type="NodePort", ports=[port("p80", 80, nodePort=3003)]),
        svc("ns4", "svc4", "172.30.0.44", svc_type="NodePort", externalIPs=["192.168.99.33"],
            ports=[port("p80", 80, targetPort=80)]),
        # Extra whitespace in the source range: kube-proxy trims it (backward compatibility).
        svc("ns5", "svc5", "172.30.0.45", svc_type="LoadBalancer", externalTrafficPolicy="Cluster",
            ports=[port("p80", 80, nodePort=3002)], ingress=[{"ip": "5.6.7.8"}], healthCheckNodePort=30000,
            loadBalancerSourceRanges=[" 203.0.113.0/25"], sessionAffinity="ClientIP",
            sessionAffinityConfig={"clientIP": {"timeoutSeconds": 10800}}),
        svc("ns6", "svc6", "172.30.0.46", ports=[port("p80", 80, targetPort=80)]),
    ]
    slices = [
        eps("ns1", "svc1", [ep("10.180.0.1")]),
        # Not on this node: under eTP Local it is no local endpoint.
        eps("ns2", "svc2", [ep("10.180.0.2")]),
        eps("ns3", "svc3", [ep("10.180.0.3")]),
        eps("ns4", "svc4", [ep("10.180.0.4"), ep("10.180.0.5", NODE)]),
        eps("ns5", "svc5", [ep("10.180.0.3")]),
    ]
    return services, slices


OVERALL = BASE_RULES + golden("""
    # svc1
    add chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80
    add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
    add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }

    add chain ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
    add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
    add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80

    add element ip kube-proxy cluster-ips { 172.30.0.41 }
    add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }

    # svc2
    add chain ip kube-proxy service-42NFTM6N-ns2/svc2/tcp/p80
    add rule ip kube-proxy service-42NFTM6N-ns2/svc2/tcp/p80 ip daddr 172.30.0.42 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
    add rule ip kube-proxy service-42NFTM6N-ns2/svc2/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 }
    add chain ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80
    add rule ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80 ip saddr 10.0.0.0/8 goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit pod traffic"
    add rule ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"
    add rule ip kube-proxy external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit local traffic"
    add chain ip kube-proxy endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80
    add rule ip kube-proxy endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 ip saddr 10.180.0.2 jump mark-for-masquerade
    add rule ip kube-proxy endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 meta l4proto tcp dnat to 10.180.0.2:80

    add element ip kube-proxy cluster-ips { 172.30.0.42 }
    add element ip kube-proxy service-ips { 172.30.0.42 . tcp . 80 : goto service-42NFTM6N-ns2/svc2/tcp/p80 }
    add element ip kube-proxy service-ips { 192.168.99.22 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
    add element ip kube-proxy service-ips { 1.2.3.4 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
    add element ip kube-proxy service-nodeports { tcp . 3001 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }

    add element ip kube-proxy no-endpoint-nodeports { tcp . 3001 comment "ns2/svc2:p80" : drop }
    add element ip kube-proxy no-endpoint-services { 1.2.3.4 . tcp . 80 comment "ns2/svc2:p80" : drop }
    add element ip kube-proxy no-endpoint-services { 192.168.99.22 . tcp . 80 comment "ns2/svc2:p80" : drop }

    # svc3
    add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
    add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 ip daddr 172.30.0.43 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
    add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 }
    add chain ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80
    add rule ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80 jump mark-for-masquerade
    add rule ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80 goto service-4AT6LBPK-ns3/svc3/tcp/p80
    add chain ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80
    add rule ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 ip saddr 10.180.0.3 jump mark-for-masquerade
    add rule ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 meta l4proto tcp dnat to 10.180.0.3:80

    add element ip kube-proxy cluster-ips { 172.30.0.43 }
    add element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 : goto service-4AT6LBPK-ns3/svc3/tcp/p80 }
    add element ip kube-proxy service-nodeports { tcp . 3003 : goto external-4AT6LBPK-ns3/svc3/tcp/p80 }

    # svc4
    add chain ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80
    add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 ip daddr 172.30.0.44 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
    add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 numgen random mod 2 vmap { 0 : goto endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 , 1 : goto endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 }
    add chain ip kube-proxy external-LAUZTJTB-ns4/svc4/tcp/p80
    add rule ip kube-proxy external-LAUZTJTB-ns4/svc4/tcp/p80 jump mark-for-masquerade
    add rule ip kube-proxy external-LAUZTJTB-ns4/svc4/tcp/p80 goto service-LAUZTJTB-ns4/svc4/tcp/p80
    add chain ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80
    add rule ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 ip saddr 10.180.0.5 jump mark-for-masquerade
    add rule ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 meta l4proto tcp dnat to 10.180.0.5:80
    add chain ip kube-proxy endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80
    add rule ip kube-proxy endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 ip saddr 10.180.0.4 jump mark-for-masquerade
    add rule ip kube-proxy endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 meta l4proto tcp dnat to 10.180.0.4:80

    add element ip kube-proxy cluster-ips { 172.30.0.44 }
    add element ip kube-proxy service-ips { 172.30.0.44 . tcp . 80 : goto service-LAUZTJTB-ns4/svc4/tcp/p80 }
    add element ip kube-proxy service-ips { 192.168.99.33 . tcp . 80 : goto external-LAUZTJTB-ns4/svc4/tcp/p80 }

    # svc5
    add set ip kube-proxy affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
    add chain ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80
    add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 ip daddr 172.30.0.45 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
    add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 ip saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80
    add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 }
    add chain ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80
    add rule ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80 jump mark-for-masquerade
    add rule ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80 goto service-HVFWP5L3-ns5/svc5/tcp/p80

    add chain ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80
    add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 ip saddr 10.180.0.3 jump mark-for-masquerade
    add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 update @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip saddr }
    add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 meta l4proto tcp dnat to 10.180.0.3:80

    add chain ip kube-proxy firewall-HVFWP5L3-ns5/svc5/tcp/p80
    add rule ip kube-proxy firewall-HVFWP5L3-ns5/svc5/tcp/p80 ip saddr != { 203.0.113.0/25 } drop

    add element ip kube-proxy cluster-ips { 172.30.0.45 }
    add element ip kube-proxy service-ips { 172.30.0.45 . tcp . 80 : goto service-HVFWP5L3-ns5/svc5/tcp/p80 }
    add element ip kube-proxy service-ips { 5.6.7.8 . tcp . 80 : goto external-HVFWP5L3-ns5/svc5/tcp/p80 }
    add element ip kube-proxy service-nodeports { tcp . 3002 : goto external-HVFWP5L3-ns5/svc5/tcp/p80 }
    add element ip kube-proxy firewall-ips { 5.6.7.8 . tcp . 80 : goto firewall-HVFWP5L3-ns5/svc5/tcp/p80 }

    # svc6
    add element ip kube-proxy cluster-ips { 172.30.0.46 }
    add element ip kube-proxy no-endpoint-services { 172.30.0.46 . tcp . 80 comment "ns6/svc6:p80" : goto reject-chain }
    """)


def test_overall_rules_upstream_TestOverallNFTablesRules() -> None:
    services, slices = overall_objects()
    ruleset = render_nft(services, slices, UPSTREAM, first_sync=True)
    assert_same_table(OVERALL, ruleset.text)
    # eTP Local without a local endpoint (svc2) is the one "no local endpoints" Service.
    assert (ruleset.no_local_endpoints_internal, ruleset.no_local_endpoints_external) == (0, 1)
    assert ruleset.health_check_node_ports == (("ns2/svc2", 30000),)


def test_every_object_is_created_before_it_is_referenced() -> None:
    """The transaction is valid `nft -f` input in write order: apply_transaction refuses a rule or
    element naming a chain or set not yet created; the upstream text above, in its own order, is
    only a table dump and references chains before their `add chain`."""
    services, slices = overall_objects()
    text = render_nft(services, slices, UPSTREAM).text
    apply_transaction(None, text)
    with pytest.raises(TableError, match="no such chain"):
        apply_transaction(None, OVERALL)
    chain = "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
    without = text.replace(f"add chain ip kube-proxy {chain}\nflush chain ip kube-proxy {chain}\n", "")
    with pytest.raises(TableError, match=f"no such chain {chain}: add rule ip kube-proxy service-ULMVA6XW"):
        apply_transaction(None, without)


# The IPv6 case: a NodePort Service with two endpoints, from the 1.33-era kube-proxy dump that
# knftables' fake_test.go carries (TestFakeParseDump), without that test's two "test comment"s and
# the extra nodeport-ips element it adds by hand.
IPV6 = golden("""
    add table ip6 kube-proxy { comment "rules for kube-proxy" ; }
    add chain ip6 kube-proxy cluster-ips-check
    add chain ip6 kube-proxy endpoint-2CRNCTTE-ns1/svc1/tcp/p80__fd00.10.180..2.1/80
    add chain ip6 kube-proxy endpoint-ZVRFLKHO-ns1/svc1/tcp/p80__fd00.10.180..1/80
    add chain ip6 kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80
    add chain ip6 kube-proxy filter-forward { type filter hook forward priority -110 ; }
    add chain ip6 kube-proxy filter-input { type filter hook input priority -110 ; }
    add chain ip6 kube-proxy filter-output { type filter hook output priority -110 ; }
    add chain ip6 kube-proxy filter-output-post-dnat { type filter hook output priority -90 ; }
    add chain ip6 kube-proxy filter-prerouting { type filter hook prerouting priority -110 ; }
    add chain ip6 kube-proxy firewall-check
    add chain ip6 kube-proxy mark-for-masquerade
    add chain ip6 kube-proxy masquerading
    add chain ip6 kube-proxy nat-output { type nat hook output priority -100 ; }
    add chain ip6 kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
    add chain ip6 kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
    add chain ip6 kube-proxy nodeport-endpoints-check
    add chain ip6 kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
    add chain ip6 kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80
    add chain ip6 kube-proxy service-endpoints-check
    add chain ip6 kube-proxy services
    add set ip6 kube-proxy cluster-ips { type ipv6_addr ; comment "Active ClusterIPs" ; }
    add set ip6 kube-proxy nodeport-ips { type ipv6_addr ; comment "IPs that accept NodePort traffic" ; }
    add map ip6 kube-proxy firewall-ips { type ipv6_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
    add map ip6 kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
    add map ip6 kube-proxy no-endpoint-services { type ipv6_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
    add map ip6 kube-proxy service-ips { type ipv6_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
    add map ip6 kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
    add rule ip6 kube-proxy cluster-ips-check ip6 daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
    add rule ip6 kube-proxy cluster-ips-check ip6 daddr { fd00:10:96::/112 } drop comment "Drop traffic to unallocated ClusterIPs"
    add rule ip6 kube-proxy endpoint-2CRNCTTE-ns1/svc1/tcp/p80__fd00.10.180..2.1/80 ip6 saddr fd00:10:180::2:1 jump mark-for-masquerade
    add rule ip6 kube-proxy endpoint-2CRNCTTE-ns1/svc1/tcp/p80__fd00.10.180..2.1/80 meta l4proto tcp dnat to [fd00:10:180::2:1]:80
    add rule ip6 kube-proxy endpoint-ZVRFLKHO-ns1/svc1/tcp/p80__fd00.10.180..1/80 ip6 saddr fd00:10:180::1 jump mark-for-masquerade
    add rule ip6 kube-proxy endpoint-ZVRFLKHO-ns1/svc1/tcp/p80__fd00.10.180..1/80 meta l4proto tcp dnat to [fd00:10:180::1]:80
    add rule ip6 kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80 jump mark-for-masquerade
    add rule ip6 kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80 goto service-ULMVA6XW-ns1/svc1/tcp/p80
    add rule ip6 kube-proxy filter-forward ct state new jump service-endpoints-check
    add rule ip6 kube-proxy filter-forward ct state new jump cluster-ips-check
    add rule ip6 kube-proxy filter-input ct state new jump nodeport-endpoints-check
    add rule ip6 kube-proxy filter-input ct state new jump service-endpoints-check
    add rule ip6 kube-proxy filter-output ct state new jump service-endpoints-check
    add rule ip6 kube-proxy filter-output ct state new jump firewall-check
    add rule ip6 kube-proxy filter-output-post-dnat ct state new jump cluster-ips-check
    add rule ip6 kube-proxy filter-prerouting ct state new jump firewall-check
    add rule ip6 kube-proxy firewall-check ip6 daddr . meta l4proto . th dport vmap @firewall-ips
    add rule ip6 kube-proxy mark-for-masquerade mark set mark or 0x4000
    add rule ip6 kube-proxy masquerading mark and 0x4000 == 0 return
    add rule ip6 kube-proxy masquerading mark set mark xor 0x4000
    add rule ip6 kube-proxy masquerading masquerade fully-random
    add rule ip6 kube-proxy nat-output jump services
    add rule ip6 kube-proxy nat-postrouting jump masquerading
    add rule ip6 kube-proxy nat-prerouting jump services
    add rule ip6 kube-proxy nodeport-endpoints-check ip6 daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
    add rule ip6 kube-proxy reject-chain reject
    add rule ip6 kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 ip6 daddr fd00:172:30::41 tcp dport 80 ip6 saddr != fd00:10::/64 jump mark-for-masquerade
    add rule ip6 kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 2 vmap { 0 : goto endpoint-ZVRFLKHO-ns1/svc1/tcp/p80__fd00.10.180..1/80 , 1 : goto endpoint-2CRNCTTE-ns1/svc1/tcp/p80__fd00.10.180..2.1/80 }
    add rule ip6 kube-proxy service-endpoints-check ip6 daddr . meta l4proto . th dport vmap @no-endpoint-services
    add rule ip6 kube-proxy services ip6 daddr . meta l4proto . th dport vmap @service-ips
    add rule ip6 kube-proxy services ip6 daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
    add element ip6 kube-proxy cluster-ips { fd00:172:30::41 }
    add element ip6 kube-proxy nodeport-ips { 2001:db8::1 }
    add element ip6 kube-proxy service-ips { fd00:172:30::41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
    add element ip6 kube-proxy service-nodeports { tcp . 3001 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }
    """)


def test_ipv6_nodeport_service_as_the_1_33_dump() -> None:
    config = NftConfig(node_name=NODE, node_ips=("192.168.0.2", "2001:db8::1", "2001:db8:1::2"),
                       cluster_cidr="fd00:10::/64", nodeport_addresses=("192.168.0.2/32", "2001:db8::1/128"),
                       service_cidrs=("172.30.0.0/16", "fd00:10:96::/112"), ip_family="IPv6")
    services = [Service.model_validate(service_dict(
        "ns1", "svc1", cluster_ip="fd00:172:30::41", svc_type="NodePort", ipFamilies=["IPv6"],
        ports=[port("p80", 80, nodePort=3001)]))]
    raw = slice_dict("ns1", "svc1", [ep("fd00:10:180::1"), ep("fd00:10:180::2:1")], [P80])
    slices = [EndpointSlice.model_validate({**raw, "addressType": "IPv6"})]
    ruleset = render_nft(services, slices, config)
    assert ruleset.text.startswith("add table ip6 kube-proxy")
    assert_same_table(IPV6, ruleset.text, family="ip6")


@pytest.mark.parametrize(("args", "base"), [
    pytest.param(("ns1", "svc1", "tcp", "p80"), "ULMVA6XW-ns1/svc1/tcp/p80", id="service port"),
    pytest.param(("ns5", "svc5", "TCP", "p80"), "HVFWP5L3-ns5/svc5/tcp/p80", id="protocol lower-cased"),
])
def test_service_chain_names(args: tuple[str, str, str, str], base: str) -> None:
    assert service_port_chains(*args).cluster == "service-" + base
    assert service_port_chains(*args).firewall == "firewall-" + base


def test_endpoint_chain_names_and_truncation() -> None:
    assert endpoint_base("ns1", "svc1", "tcp", "p80", "10.180.0.1", 80) == "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
    assert endpoint_base("ns1", "svc1", "tcp", "p80", "fd00:10:180::2:1", 80) == \
        "2CRNCTTE-ns1/svc1/tcp/p80__fd00.10.180..2.1/80"
    long = hash_and_truncate("x" * 300)
    assert len(long) == 240 and long.endswith("...") and long[8] == "-"


# --- behaviours, one Service at a time -------------------------------------------------------------

def rendered_table(services: list[Service], slices: list[EndpointSlice], config: NftConfig = UPSTREAM) -> str:
    return table_of(render_nft(services, slices, config).text)


def lines_about(table: str, needle: str) -> list[str]:
    return [line for line in table.splitlines() if needle in line]


def test_load_balancer_source_ranges_upstream_TestLoadBalancer() -> None:
    """Two LB IPs, ranges that include the node IP: the node's own traffic to a VIP comes back with
    the VIP as source, so the VIPs are allowed too; NodePorts do not go through the firewall."""
    services = [svc("ns1", "svc1", "172.30.0.41", svc_type="LoadBalancer", ports=[port("p80", 80, nodePort=3001)],
                    ingress=[{"ip": "1.2.3.4"}, {"ip": "5.6.7.8"}],
                    loadBalancerSourceRanges=["192.168.0.0/24", " 203.0.113.0/25"])]
    table = rendered_table(services, [eps("ns1", "svc1", [ep("10.180.0.1")])])
    fw = "firewall-ULMVA6XW-ns1/svc1/tcp/p80"
    assert lines_about(table, f"add rule ip kube-proxy {fw} ") == [
        f"add rule ip kube-proxy {fw} ip saddr != {{ 192.168.0.0/24 , 203.0.113.0/25 , 1.2.3.4 , 5.6.7.8 }} drop"]
    assert lines_about(table, "add element ip kube-proxy firewall-ips") == [
        f"add element ip kube-proxy firewall-ips {{ 1.2.3.4 . tcp . 80 : goto {fw} }}",
        f"add element ip kube-proxy firewall-ips {{ 5.6.7.8 . tcp . 80 : goto {fw} }}"]
    assert lines_about(table, "service-nodeports { tcp . 3001") == [
        "add element ip kube-proxy service-nodeports { tcp . 3001 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }"]


def test_source_ranges_are_enforced_without_endpoints() -> None:
    """Unlike the iptables mode's KUBE-FW chain, the firewall is written whatever the endpoints:
    it filters before DNAT, and the no-endpoints reject comes after it."""
    services = [svc("ns1", "svc1", "172.30.0.41", svc_type="LoadBalancer", ports=[port("p80", 80, nodePort=3001)],
                    ingress=[{"ip": "1.2.3.4"}], loadBalancerSourceRanges=["203.0.113.0/25"])]
    table = rendered_table(services, [])
    assert "add element ip kube-proxy firewall-ips { 1.2.3.4 . tcp . 80 : goto firewall-ULMVA6XW-ns1/svc1/tcp/p80 }" in table
    assert lines_about(table, "add element ip kube-proxy no-endpoint-") == [
        'add element ip kube-proxy no-endpoint-nodeports { tcp . 3001 comment "ns1/svc1:p80" : goto reject-chain }',
        'add element ip kube-proxy no-endpoint-services { 1.2.3.4 . tcp . 80 comment "ns1/svc1:p80" : goto reject-chain }',
        'add element ip kube-proxy no-endpoint-services { 172.30.0.41 . tcp . 80 comment "ns1/svc1:p80" : goto reject-chain }']


def test_external_traffic_policy_local_with_a_local_endpoint() -> None:
    services = [svc("ns1", "svc1", "172.30.0.41", svc_type="NodePort", externalTrafficPolicy="Local",
                    ports=[port("p80", 80, nodePort=3001)])]
    table = rendered_table(services, [eps("ns1", "svc1", [ep("10.180.0.1", NODE), ep("10.180.0.2", "other")])])
    base = "ULMVA6XW-ns1/svc1/tcp/p80"
    local_ep = endpoint_base("ns1", "svc1", "tcp", "p80", "10.180.0.1", 80)
    assert lines_about(table, f"add rule ip kube-proxy local-{base} ") == [
        f"add rule ip kube-proxy local-{base} numgen random mod 1 vmap {{ 0 : goto endpoint-{local_ep} }}"]
    assert lines_about(table, f"add rule ip kube-proxy external-{base} ")[-1] == \
        f"add rule ip kube-proxy external-{base} goto local-{base}"
    assert "no-endpoint-nodeports {" not in table.replace("add map ip kube-proxy no-endpoint-nodeports {", "")


def test_internal_traffic_policy_local_without_a_local_endpoint_drops() -> None:
    services = [svc("ns1", "svc1", "172.30.0.41", internalTrafficPolicy="Local", ports=[P80])]
    ruleset = render_nft(services, [eps("ns1", "svc1", [ep("10.180.0.2", "other")])], UPSTREAM)
    table = table_of(ruleset.text)
    assert 'add element ip kube-proxy no-endpoint-services { 172.30.0.41 . tcp . 80 comment "ns1/svc1:p80" : drop }' \
        in table
    assert "172.30.0.41 . tcp . 80 : goto" not in table
    assert "service-ULMVA6XW" not in table  # no chain at all: iTP Local uses no cluster endpoints
    assert ruleset.no_local_endpoints_internal == 1


@pytest.mark.parametrize(("config", "rule"), [
    pytest.param(UPSTREAM.__class__(**{**UPSTREAM.__dict__, "masquerade_all": True}),
                 "ip daddr 172.30.0.41 tcp dport 80 jump mark-for-masquerade", id="masquerade-all"),
    pytest.param(UPSTREAM.__class__(**{**UPSTREAM.__dict__, "cluster_cidr": None}), None, id="no local detector"),
])
def test_cluster_ip_masquerade(config: NftConfig, rule: str | None) -> None:
    table = rendered_table([svc("ns1", "svc1", "172.30.0.41", ports=[P80])],
                           [eps("ns1", "svc1", [ep("10.180.0.1")])], config)
    rules = lines_about(table, "add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 ")
    assert rules[:-1] == ([f"add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 {rule}"] if rule else [])


def test_nodeports_on_every_local_address_without_nodeport_addresses() -> None:
    config = NftConfig(node_name=NODE, node_ips=("192.168.0.2",), cluster_cidr="10.0.0.0/8")
    table = rendered_table([], [], config)
    assert "nodeport-ips" not in table.replace("nodeport-ips set", "")  # the set is deleted
    assert lines_about(table, "add rule ip kube-proxy services ")[-1] == \
        "add rule ip kube-proxy services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"
    assert lines_about(table, "add rule ip kube-proxy nodeport-endpoints-check ") == [
        "add rule ip kube-proxy nodeport-endpoints-check ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"]
    # No ServiceCIDR known: nothing is dropped as unallocated.
    assert "Drop traffic to unallocated ClusterIPs" not in table


def test_service_cidrs_of_the_family_in_one_drop_rule() -> None:
    config = NftConfig(service_cidrs=("10.96.0.0/12", "fd00:10:96::/112", "10.100.0.0/16", "10.96.0.0/12"))
    assert 'add rule ip kube-proxy cluster-ips-check ip daddr { 10.100.0.0/16,10.96.0.0/12 } drop comment ' \
        '"Drop traffic to unallocated ClusterIPs"' in rendered_table([], [], config)


def test_session_affinity_timeout_and_three_endpoints() -> None:
    """The seed's shape: three endpoints at a third each, sticky for the configured seconds."""
    services = [svc("default", "web", "10.96.100.100", ports=[port("http", 80)], sessionAffinity="ClientIP",
                    sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})]
    table = rendered_table(services, [eps("default", "web", [ep("10.244.1.2"), ep("10.244.2.2"), ep("10.244.1.3")],
                                          [port("http", 8080)])])
    base = service_port_chains("default", "web", "tcp", "http").cluster
    dispatch = lines_about(table, f"add rule ip kube-proxy {base} ")
    assert len(dispatch) == 1 + 3 + 1  # masquerade, three sticky checks, the numgen verdict map
    assert "numgen random mod 3 vmap { 0 : goto endpoint-" in dispatch[-1]
    # Endpoints in kube-proxy's string order: 10.244.1.2:8080 < 10.244.1.3:8080 < 10.244.2.2:8080.
    assert [d.split("__")[1].split("/")[0] for d in dispatch[1:4]] == ["10.244.1.2", "10.244.1.3", "10.244.2.2"]
    assert len(lines_about(table, "flags dynamic,timeout ; timeout 60s ;")) == 3


# --- partial syncs -----------------------------------------------------------------------------------

def test_partial_sync_touches_only_the_changed_services() -> None:
    """A partial sync applied to the table a full sync left gives the table a full sync of the new
    objects gives, once the stale chains (flushed now) are deleted; and it names no chain of a
    Service that did not change."""
    services, slices = overall_objects()
    first = render_nft(services, slices, UPSTREAM, first_sync=True)
    table = apply_transaction(None, first.text)

    # ns1/svc1 gains an endpoint; ns4/svc4 is deleted; nothing else changes.
    new_services = [s for s in services if s.name != "svc4"]
    new_slices = [eps("ns1", "svc1", [ep("10.180.0.1"), ep("10.180.0.9")])] + [
        s for s in slices if s.namespace not in ("ns1", "ns4")]
    partial = render_nft(new_services, new_slices, UPSTREAM, changed={"ns1/svc1", "ns4/svc4"},
                         previous_elements=first.elements, existing_chains=frozenset(table.chains),
                         existing_sets=frozenset(table.sets))
    after = apply_transaction(table, partial.text)

    for other in ("ns2/svc2", "ns3/svc3", "ns5/svc5", "ns6/svc6"):
        assert other not in partial.text
    assert not partial.text.startswith("add table")  # the fixed part is a full sync's business
    assert partial.services_written == 1  # svc1 (svc4 has no port left to write)
    assert sorted(partial.stale_chains) == sorted(c for c in table.chains if "ns4/svc4" in c)
    assert all(after.chains[c].rules == [] for c in partial.stale_chains)
    # The elements that did not change are not rewritten; svc4's go.
    assert "172.30.0.41 . tcp . 80" not in partial.text
    assert "delete element ip kube-proxy service-ips { 192.168.99.33 . tcp . 80 }" in partial.text

    later = apply_transaction(after, "".join(f"delete chain ip kube-proxy {c}\n" for c in partial.stale_chains))
    full = apply_transaction(None, render_nft(new_services, new_slices, UPSTREAM).text)
    assert later.dump() == full.dump()


def test_a_map_value_that_changes_is_deleted_then_added() -> None:
    """nft refuses to add a key that is there with another value: kube-proxy deletes it first
    (internalTrafficPolicy Cluster -> Local sends the same ClusterIP key to the local- chain)."""
    slices = [eps("ns1", "svc1", [ep("10.180.0.1", NODE)])]
    first = render_nft([svc("ns1", "svc1", "172.30.0.41", ports=[P80])], slices, UPSTREAM)
    table = apply_transaction(None, first.text)
    local = [svc("ns1", "svc1", "172.30.0.41", internalTrafficPolicy="Local", ports=[P80])]
    partial = render_nft(local, slices, UPSTREAM, changed={"ns1/svc1"}, previous_elements=first.elements,
                         existing_chains=frozenset(table.chains))
    key = "172.30.0.41 . tcp . 80"
    assert [line for line in partial.text.splitlines() if key in line] == [
        f"delete element ip kube-proxy service-ips {{ {key} }}",
        f"add element ip kube-proxy service-ips {{ {key} : goto local-ULMVA6XW-ns1/svc1/tcp/p80 }}"]
    after = apply_transaction(table, partial.text + "".join(
        f"delete chain ip kube-proxy {c}\n" for c in partial.stale_chains))
    assert after.dump() == table_of(render_nft(local, slices, UPSTREAM).text)
