"""Golden tests of whole iptables-restore payloads (reference/kube-proxy-iptables.md).

Each case renders Services + EndpointSlices and compares `canonical_sort(payload)` with an
expected text written in canonical order, as kube-proxy's proxier_test.go does; every full-sync
expected text must also pass `check_consistency`. Cases named "(upstream ...)" feed the inputs of
that upstream test and expect upstream's text verbatim, except for the mark: upstream's fake
proxier sets the literal "0x4000", while kube-proxy proper prints fmt.Sprintf("%#08x", 1<<14),
i.e. 0x00004000, which is what kubelab writes.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

import pytest

from kubelab.models import EndpointSlice, Service
from proxyagent.canonical import canonical_sort, check_consistency
from proxyagent.render import JUMP_RULES, ProxyConfig, render

NODE = "test-node"
# kube-proxy's defaults on a node whose iptables has --random-fully and no nfacct counters.
CONFIG = ProxyConfig(node_name=NODE, node_ips=("192.168.0.2",), cluster_cidr="10.0.0.0/8")
# Upstream's NewFakeProxier: pod CIDR 10.0.0.0/8, node IP 192.168.0.2, a fake iptables without
# --random-fully, and both nfacct counters present.
UPSTREAM = dataclasses.replace(CONFIG, random_fully=False, nfacct=True)

P80 = {"name": "p80", "port": 80, "protocol": "TCP"}
UNNAMED_80 = {"name": "", "port": 80, "protocol": "TCP"}


def service(ns: str, name: str, *, ingress: list[dict[str, Any]] | None = None,
            labels: dict[str, str] | None = None, **spec: Any) -> Service:
    """A v1 Service; `spec` keys are the wire (camelCase) names."""
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Service",
                           "metadata": {"namespace": ns, "name": name, "labels": labels or {}}, "spec": spec}
    if ingress is not None:
        obj["status"] = {"loadBalancer": {"ingress": ingress}}
    return Service.from_dict(obj)


def endpoint_slice(ns: str, service_name: str, endpoints: list[dict[str, Any]], ports: list[dict[str, Any]], *,
                   address_type: str = "IPv4", labels: dict[str, str] | None = None) -> EndpointSlice:
    return EndpointSlice.from_dict({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": ns, "name": f"{service_name}-abcde",
                     "labels": {"kubernetes.io/service-name": service_name, **(labels or {})}},
        "addressType": address_type, "endpoints": endpoints, "ports": ports})


def ep(ip: str, node: str | None = None, **conditions: bool) -> dict[str, Any]:
    """An endpoint; conditions left out read as kube-proxy reads nil (ready, serving, not terminating)."""
    out: dict[str, Any] = {"addresses": [ip]}
    if node is not None:
        out["nodeName"] = node
    if conditions:
        out["conditions"] = conditions
    return out


def golden(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def large_cluster_case(unusable: int) -> tuple[list[Service], list[EndpointSlice]]:
    """ns1/svc1 with two endpoints, plus a service with `unusable` endpoints that are neither
    ready nor serving: they give no rules but still count towards the large-cluster threshold,
    since kube-proxy counts every endpoint of every service port."""
    services = [service("ns0", "big", clusterIP="172.30.0.40", ports=[P80]),
                service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])]
    slices = [endpoint_slice("ns0", "big", [ep(f"10.1.{i // 256}.{i % 256}", ready=False, serving=False)
                                            for i in range(unusable)], [P80]),
              endpoint_slice("ns1", "svc1", [ep("10.0.0.0"), ep("10.0.0.1")], [P80])]
    return services, slices


GOLDEN = [
    pytest.param(
        [service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])],
        [endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
            COMMIT
            """),
        id="clusterip basic (reference example)"),
    pytest.param(
        [service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])],
        [endpoint_slice("ns1", "svc1", [ep("10.180.0.1"), ep("10.180.0.2"), ep("10.180.0.3")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-ICDUIKC33SFI6ZPR - [0:0]
            :KUBE-SEP-LXVODXWDISEETFEF - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-ICDUIKC33SFI6ZPR -m comment --comment ns1/svc1:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-ICDUIKC33SFI6ZPR -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
            -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
            -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-SXIVWICOYRO3J4NJ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-LXVODXWDISEETFEF
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.3:80" -j KUBE-SEP-ICDUIKC33SFI6ZPR
            COMMIT
            """),
        id="clusterip three endpoints"),
    pytest.param(
        [service("ns1", "ep1", clusterIP="172.30.0.41", ports=[{"name": "p11", "port": 11, "protocol": "UDP"}])],
        [endpoint_slice("ns1", "ep1", [ep("10.1.1.1"), ep("10.1.1.11")],
                        [{"name": "p11", "port": 11, "protocol": "UDP"}])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-6KORG2Q5XSAZ4QGU - [0:0]
            :KUBE-SEP-G3ZBCGHSASVKIWER - [0:0]
            :KUBE-SVC-DMNBPL66FG4LIXGA - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/ep1:p11 cluster IP" -m udp -p udp -d 172.30.0.41 --dport 11 -j KUBE-SVC-DMNBPL66FG4LIXGA
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-6KORG2Q5XSAZ4QGU -m comment --comment ns1/ep1:p11 -s 10.1.1.11 -j KUBE-MARK-MASQ
            -A KUBE-SEP-6KORG2Q5XSAZ4QGU -m comment --comment ns1/ep1:p11 -m udp -p udp -j DNAT --to-destination 10.1.1.11:11
            -A KUBE-SEP-G3ZBCGHSASVKIWER -m comment --comment ns1/ep1:p11 -s 10.1.1.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-G3ZBCGHSASVKIWER -m comment --comment ns1/ep1:p11 -m udp -p udp -j DNAT --to-destination 10.1.1.1:11
            -A KUBE-SVC-DMNBPL66FG4LIXGA -m comment --comment "ns1/ep1:p11 cluster IP" -m udp -p udp -d 172.30.0.41 --dport 11 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-DMNBPL66FG4LIXGA -m comment --comment "ns1/ep1:p11 -> 10.1.1.11:11" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-6KORG2Q5XSAZ4QGU
            -A KUBE-SVC-DMNBPL66FG4LIXGA -m comment --comment "ns1/ep1:p11 -> 10.1.1.1:11" -j KUBE-SEP-G3ZBCGHSASVKIWER
            COMMIT
            """),
        id="endpoint string ordering"),
    pytest.param(
        [service("default", "web", clusterIP="10.96.0.10", ports=[{"port": 80, "protocol": "TCP", "targetPort": 8080}])],
        [endpoint_slice("default", "web", [ep("10.244.1.5")], [{"name": "", "port": 8080, "protocol": "TCP"}])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-XQWD6PXGZUTOOIVQ - [0:0]
            :KUBE-SVC-LOLE4ISW44XBNF3G - [0:0]
            -A KUBE-SERVICES -m comment --comment "default/web cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-LOLE4ISW44XBNF3G
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-XQWD6PXGZUTOOIVQ -m comment --comment default/web -s 10.244.1.5 -j KUBE-MARK-MASQ
            -A KUBE-SEP-XQWD6PXGZUTOOIVQ -m comment --comment default/web -m tcp -p tcp -j DNAT --to-destination 10.244.1.5:8080
            -A KUBE-SVC-LOLE4ISW44XBNF3G -m comment --comment "default/web cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-LOLE4ISW44XBNF3G -m comment --comment "default/web -> 10.244.1.5:8080" -j KUBE-SEP-XQWD6PXGZUTOOIVQ
            COMMIT
            """),
        id="unnamed port"),
    pytest.param(
        [service("ns3", "svc3", type="NodePort", clusterIP="172.30.0.43", ports=[{**P80, "nodePort": 30080}])],
        [endpoint_slice("ns3", "svc3", [ep("10.180.0.3")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-X27LE4BHSL4DOUIK - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-OYPFS5VJICHGATKP - [0:0]
            :KUBE-SVC-X27LE4BHSL4DOUIK - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns3/svc3:p80 -m tcp -p tcp --dport 30080 -j KUBE-EXT-X27LE4BHSL4DOUIK
            -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-X27LE4BHSL4DOUIK -m comment --comment "masquerade traffic for ns3/svc3:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-X27LE4BHSL4DOUIK -j KUBE-SVC-X27LE4BHSL4DOUIK
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
            -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 -> 10.180.0.3:80" -j KUBE-SEP-OYPFS5VJICHGATKP
            COMMIT
            """),
        id="nodeport"),
    pytest.param(
        [service("ns4", "svc4", clusterIP="172.30.0.44", externalIPs=["192.168.99.33"], ports=[P80])],
        [endpoint_slice("ns4", "svc4", [ep("10.180.0.4")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-4SW47YFZTEDKD3PK - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-UKSFD7AGPMPPLUHC - [0:0]
            :KUBE-SVC-4SW47YFZTEDKD3PK - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp -p tcp -d 172.30.0.44 --dport 80 -j KUBE-SVC-4SW47YFZTEDKD3PK
            -A KUBE-SERVICES -m comment --comment "ns4/svc4:p80 external IP" -m tcp -p tcp -d 192.168.99.33 --dport 80 -j KUBE-EXT-4SW47YFZTEDKD3PK
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-4SW47YFZTEDKD3PK -m comment --comment "masquerade traffic for ns4/svc4:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-4SW47YFZTEDKD3PK -j KUBE-SVC-4SW47YFZTEDKD3PK
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-UKSFD7AGPMPPLUHC -m comment --comment ns4/svc4:p80 -s 10.180.0.4 -j KUBE-MARK-MASQ
            -A KUBE-SEP-UKSFD7AGPMPPLUHC -m comment --comment ns4/svc4:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.4:80
            -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp -p tcp -d 172.30.0.44 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.4:80" -j KUBE-SEP-UKSFD7AGPMPPLUHC
            COMMIT
            """),
        id="external ips"),
    pytest.param(
        [service("ns5", "svc5", ingress=[{"ip": "5.6.7.8"}], type="LoadBalancer", clusterIP="172.30.0.45",
                 ports=[{**P80, "nodePort": 30002}])],
        [endpoint_slice("ns5", "svc5", [ep("10.180.0.3")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-NUKIZ6OKUXPJNT4C - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-I77PXRDZVX7PMWMN - [0:0]
            :KUBE-SVC-NUKIZ6OKUXPJNT4C - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp --dport 30002 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
            -A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 -j KUBE-SVC-NUKIZ6OKUXPJNT4C
            -A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-NUKIZ6OKUXPJNT4C -m comment --comment "masquerade traffic for ns5/svc5:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-NUKIZ6OKUXPJNT4C -j KUBE-SVC-NUKIZ6OKUXPJNT4C
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
            -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -j KUBE-SEP-I77PXRDZVX7PMWMN
            COMMIT
            """),
        id="loadbalancer without source ranges"),
    pytest.param(
        [service("ns5", "svc5", ingress=[{"ip": "5.6.7.8"}], type="LoadBalancer", clusterIP="172.30.0.45",
                 loadBalancerSourceRanges=["203.0.113.0/25"], ports=[{**P80, "nodePort": 30002}])],
        [endpoint_slice("ns5", "svc5", [ep("10.180.0.3")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            -A KUBE-PROXY-FIREWALL -m comment --comment "ns5/svc5:p80 traffic not accepted by KUBE-FW-NUKIZ6OKUXPJNT4C" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j DROP
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-NUKIZ6OKUXPJNT4C - [0:0]
            :KUBE-FW-NUKIZ6OKUXPJNT4C - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-I77PXRDZVX7PMWMN - [0:0]
            :KUBE-SVC-NUKIZ6OKUXPJNT4C - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp --dport 30002 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
            -A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 -j KUBE-SVC-NUKIZ6OKUXPJNT4C
            -A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-FW-NUKIZ6OKUXPJNT4C
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-NUKIZ6OKUXPJNT4C -m comment --comment "masquerade traffic for ns5/svc5:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-NUKIZ6OKUXPJNT4C -j KUBE-SVC-NUKIZ6OKUXPJNT4C
            -A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 203.0.113.0/25 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
            -A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "other traffic to ns5/svc5:p80 will be dropped by KUBE-PROXY-FIREWALL"
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
            -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -j KUBE-SEP-I77PXRDZVX7PMWMN
            COMMIT
            """),
        id="loadbalancer source ranges"),
    pytest.param(
        # As upstream TestLoadBalancer: 192.168.0.0/24 holds the node IP, so traffic the node sends
        # to its own VIPs (source = the VIP) is let through too; whitespace is trimmed.
        [service("ns1", "svc1", ingress=[{"ip": "1.2.3.4"}, {"ip": "5.6.7.8"}], type="LoadBalancer",
                 clusterIP="172.30.0.41", loadBalancerSourceRanges=["192.168.0.0/24", " 203.0.113.0/25"],
                 ports=[{**P80, "nodePort": 3001}])],
        [endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            -A KUBE-PROXY-FIREWALL -m comment --comment "ns1/svc1:p80 traffic not accepted by KUBE-FW-XPGD46QRK7WJZT7O" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP
            -A KUBE-PROXY-FIREWALL -m comment --comment "ns1/svc1:p80 traffic not accepted by KUBE-FW-XPGD46QRK7WJZT7O" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j DROP
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]
            :KUBE-FW-XPGD46QRK7WJZT7O - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-FW-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-FW-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade traffic for ns1/svc1:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 loadbalancer IP" -s 192.168.0.0/24 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 loadbalancer IP" -s 203.0.113.0/25 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 loadbalancer IP" -s 1.2.3.4 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 loadbalancer IP" -s 5.6.7.8 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "other traffic to ns1/svc1:p80 will be dropped by KUBE-PROXY-FIREWALL"
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
            COMMIT
            """),
        id="loadbalancer source range containing node ip"),
    pytest.param(
        # ipMode Proxy ingress and hostname-only ingress get no rules; 0.0.0.0/0 means "allow
        # all", the same as no source ranges: no FW chain.
        [service("ns1", "svc1", ingress=[{"ip": "1.2.3.4", "ipMode": "Proxy"}, {"ip": "5.6.7.8", "ipMode": "VIP"},
                                         {"hostname": "lb.example.com"}],
                 type="LoadBalancer", clusterIP="172.30.0.41", loadBalancerSourceRanges=["0.0.0.0/0"], ports=[P80])],
        [endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade traffic for ns1/svc1:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
            COMMIT
            """),
        id="proxy ipmode and zero source range"),
    pytest.param(
        [service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80], sessionAffinity="ClientIP",
                 sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}})],
        [endpoint_slice("ns1", "svc1", [ep("10.180.0.1"), ep("10.180.0.2")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-LXVODXWDISEETFEF - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
            -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -m recent --name KUBE-SEP-LXVODXWDISEETFEF --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m recent --name KUBE-SEP-SXIVWICOYRO3J4NJ --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m recent --name KUBE-SEP-SXIVWICOYRO3J4NJ --rcheck --seconds 600 --reap -j KUBE-SEP-SXIVWICOYRO3J4NJ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -m recent --name KUBE-SEP-LXVODXWDISEETFEF --rcheck --seconds 600 --reap -j KUBE-SEP-LXVODXWDISEETFEF
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j KUBE-SEP-LXVODXWDISEETFEF
            COMMIT
            """),
        id="session affinity client ip"),
    pytest.param(
        [service("ns2", "svc2", ingress=[{"ip": "1.2.3.4"}], type="LoadBalancer", externalTrafficPolicy="Local",
                 clusterIP="172.30.0.42", healthCheckNodePort=30000, ports=[{**P80, "nodePort": 3001}])],
        [endpoint_slice("ns2", "svc2", [ep("10.180.0.1"), ep("10.180.2.1", NODE)], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-NODEPORTS -m comment --comment "ns2/svc2:p80 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-GNZBNJ2PO5MGZ6GT - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-CL5TTP32JTFBIVMN - [0:0]
            :KUBE-SEP-FKDX4UEXGN6O6BS2 - [0:0]
            :KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
            :KUBE-SVL-GNZBNJ2PO5MGZ6GT - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns2/svc2:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "pod traffic for ns2/svc2:p80 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "masquerade LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "route LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -j KUBE-SVL-GNZBNJ2PO5MGZ6GT
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-CL5TTP32JTFBIVMN -m comment --comment ns2/svc2:p80 -s 10.180.2.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-CL5TTP32JTFBIVMN -m comment --comment ns2/svc2:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.2.1:80
            -A KUBE-SEP-FKDX4UEXGN6O6BS2 -m comment --comment ns2/svc2:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-FKDX4UEXGN6O6BS2 -m comment --comment ns2/svc2:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-FKDX4UEXGN6O6BS2
            -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.2.1:80" -j KUBE-SEP-CL5TTP32JTFBIVMN
            -A KUBE-SVL-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.2.1:80" -j KUBE-SEP-CL5TTP32JTFBIVMN
            COMMIT
            """),
        id="etp local with local endpoint"),
    pytest.param(
        [service("ns2", "svc2", ingress=[{"ip": "1.2.3.4"}], type="LoadBalancer", externalTrafficPolicy="Local",
                 clusterIP="172.30.0.42", externalIPs=["192.168.99.22"], healthCheckNodePort=30000,
                 ports=[{**P80, "nodePort": 3001}])],
        [endpoint_slice("ns2", "svc2", [ep("10.180.0.2", "node2")], [P80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-NODEPORTS -m comment --comment "ns2/svc2:p80 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT
            -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local endpoints" -m tcp -p tcp -d 192.168.99.22 --dport 80 -j DROP
            -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local endpoints" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP
            -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3001 -j DROP
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-GNZBNJ2PO5MGZ6GT - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-RS4RBKLTHTF2IUXJ - [0:0]
            :KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns2/svc2:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 external IP" -m tcp -p tcp -d 192.168.99.22 --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "pod traffic for ns2/svc2:p80 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "masquerade LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "route LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-RS4RBKLTHTF2IUXJ -m comment --comment ns2/svc2:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
            -A KUBE-SEP-RS4RBKLTHTF2IUXJ -m comment --comment ns2/svc2:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
            -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.0.2:80" -j KUBE-SEP-RS4RBKLTHTF2IUXJ
            COMMIT
            """),
        id="etp local without local endpoints"),
    pytest.param(
        [service("ns1", "svc1", clusterIP="172.30.1.1", internalTrafficPolicy="Local",
                 ports=[{"port": 80, "protocol": "TCP"}])],
        [endpoint_slice("ns1", "svc1", [ep("10.0.1.1", NODE), ep("10.0.1.2", "node1")], [UNNAMED_80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-3JOIVZTXZZRGORX4 - [0:0]
            :KUBE-SVL-AQI2S6QIMU7PVVRP - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1 cluster IP" -m tcp -p tcp -d 172.30.1.1 --dport 80 -j KUBE-SVL-AQI2S6QIMU7PVVRP
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-3JOIVZTXZZRGORX4 -m comment --comment ns1/svc1 -s 10.0.1.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-3JOIVZTXZZRGORX4 -m comment --comment ns1/svc1 -m tcp -p tcp -j DNAT --to-destination 10.0.1.1:80
            -A KUBE-SVL-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 cluster IP" -m tcp -p tcp -d 172.30.1.1 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVL-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 -> 10.0.1.1:80" -j KUBE-SEP-3JOIVZTXZZRGORX4
            COMMIT
            """),
        id="itp local with local endpoint"),
    pytest.param(
        [service("ns1", "svc1", clusterIP="172.30.1.1", internalTrafficPolicy="Local",
                 ports=[{"port": 80, "protocol": "TCP"}])],
        [endpoint_slice("ns1", "svc1", [ep("10.0.1.1", "node0"), ep("10.0.1.2", "node1")], [UNNAMED_80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1 has no local endpoints" -m tcp -p tcp -d 172.30.1.1 --dport 80 -j DROP
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            COMMIT
            """),
        id="itp local without local endpoints"),
    pytest.param(
        [service("ns1", "svc1", ingress=[{"ip": "1.2.3.4"}], type="LoadBalancer", clusterIP="172.30.0.41",
                 externalIPs=["192.168.99.11"], ports=[{**P80, "nodePort": 3001}])],
        [],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j REJECT
            -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 192.168.99.11 --dport 80 -j REJECT
            -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j REJECT
            -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3001 -j REJECT
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            COMMIT
            """),
        id="no endpoints reject"),
    pytest.param(
        # No ready endpoint anywhere: the serving+terminating ones are used; 10.0.1.4 is not serving.
        [service("ns1", "svc1", clusterIP="172.30.1.1", ports=[{"port": 80, "protocol": "TCP"}])],
        [endpoint_slice("ns1", "svc1", [ep("10.0.1.2", ready=False, serving=True, terminating=True),
                                        ep("10.0.1.3", ready=False, serving=True, terminating=True),
                                        ep("10.0.1.4", ready=False, serving=False, terminating=True)],
                        [UNNAMED_80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-IO5XOSKPAXIFQXAJ - [0:0]
            :KUBE-SEP-XGJFVO3L2O5SRFNT - [0:0]
            :KUBE-SVC-AQI2S6QIMU7PVVRP - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1 cluster IP" -m tcp -p tcp -d 172.30.1.1 --dport 80 -j KUBE-SVC-AQI2S6QIMU7PVVRP
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-IO5XOSKPAXIFQXAJ -m comment --comment ns1/svc1 -s 10.0.1.2 -j KUBE-MARK-MASQ
            -A KUBE-SEP-IO5XOSKPAXIFQXAJ -m comment --comment ns1/svc1 -m tcp -p tcp -j DNAT --to-destination 10.0.1.2:80
            -A KUBE-SEP-XGJFVO3L2O5SRFNT -m comment --comment ns1/svc1 -s 10.0.1.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-XGJFVO3L2O5SRFNT -m comment --comment ns1/svc1 -m tcp -p tcp -j DNAT --to-destination 10.0.1.3:80
            -A KUBE-SVC-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 cluster IP" -m tcp -p tcp -d 172.30.1.1 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 -> 10.0.1.2:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-IO5XOSKPAXIFQXAJ
            -A KUBE-SVC-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 -> 10.0.1.3:80" -j KUBE-SEP-XGJFVO3L2O5SRFNT
            COMMIT
            """),
        id="terminating fallback"),
    pytest.param(
        # The local list falls back to the local terminating endpoint while the cluster list keeps
        # the remote ready one; both get SEP chains.
        [service("ns1", "svc1", ingress=[{"ip": "1.2.3.4"}], type="LoadBalancer", externalTrafficPolicy="Local",
                 clusterIP="172.30.1.1", healthCheckNodePort=30000, ports=[{"port": 80, "protocol": "TCP"}])],
        [endpoint_slice("ns1", "svc1", [ep("10.0.1.2", NODE, ready=False, serving=True, terminating=True),
                                        ep("10.0.1.5", "node-1")], [UNNAMED_80])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-NODEPORTS -m comment --comment "ns1/svc1 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-AQI2S6QIMU7PVVRP - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-EQCHZ7S2PJ72OHAY - [0:0]
            :KUBE-SEP-IO5XOSKPAXIFQXAJ - [0:0]
            :KUBE-SVC-AQI2S6QIMU7PVVRP - [0:0]
            :KUBE-SVL-AQI2S6QIMU7PVVRP - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1 cluster IP" -m tcp -p tcp -d 172.30.1.1 --dport 80 -j KUBE-SVC-AQI2S6QIMU7PVVRP
            -A KUBE-SERVICES -m comment --comment "ns1/svc1 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-AQI2S6QIMU7PVVRP
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-AQI2S6QIMU7PVVRP -m comment --comment "pod traffic for ns1/svc1 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-AQI2S6QIMU7PVVRP
            -A KUBE-EXT-AQI2S6QIMU7PVVRP -m comment --comment "masquerade LOCAL traffic for ns1/svc1 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
            -A KUBE-EXT-AQI2S6QIMU7PVVRP -m comment --comment "route LOCAL traffic for ns1/svc1 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-AQI2S6QIMU7PVVRP
            -A KUBE-EXT-AQI2S6QIMU7PVVRP -j KUBE-SVL-AQI2S6QIMU7PVVRP
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-EQCHZ7S2PJ72OHAY -m comment --comment ns1/svc1 -s 10.0.1.5 -j KUBE-MARK-MASQ
            -A KUBE-SEP-EQCHZ7S2PJ72OHAY -m comment --comment ns1/svc1 -m tcp -p tcp -j DNAT --to-destination 10.0.1.5:80
            -A KUBE-SEP-IO5XOSKPAXIFQXAJ -m comment --comment ns1/svc1 -s 10.0.1.2 -j KUBE-MARK-MASQ
            -A KUBE-SEP-IO5XOSKPAXIFQXAJ -m comment --comment ns1/svc1 -m tcp -p tcp -j DNAT --to-destination 10.0.1.2:80
            -A KUBE-SVC-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 cluster IP" -m tcp -p tcp -d 172.30.1.1 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 -> 10.0.1.5:80" -j KUBE-SEP-EQCHZ7S2PJ72OHAY
            -A KUBE-SVL-AQI2S6QIMU7PVVRP -m comment --comment "ns1/svc1 -> 10.0.1.2:80" -j KUBE-SEP-IO5XOSKPAXIFQXAJ
            COMMIT
            """),
        id="etp local terminating fallback"),
    pytest.param(
        [service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])],
        [endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80])],
        dataclasses.replace(CONFIG, masquerade_all=True), golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
            COMMIT
            """),
        id="masquerade all"),
    pytest.param(
        # No cluster CIDR: no-op local detector, so no "! -s CIDR" masquerade rule and no pod
        # short-circuit in the EXT chain.
        [service("ns2", "svc2", type="NodePort", externalTrafficPolicy="Local", clusterIP="172.30.0.42",
                 ports=[{**P80, "nodePort": 3001}])],
        [endpoint_slice("ns2", "svc2", [ep("10.180.0.2", NODE)], [P80])],
        dataclasses.replace(CONFIG, cluster_cidr=None), golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-GNZBNJ2PO5MGZ6GT - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-RS4RBKLTHTF2IUXJ - [0:0]
            :KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
            :KUBE-SVL-GNZBNJ2PO5MGZ6GT - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns2/svc2:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "masquerade LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "route LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
            -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -j KUBE-SVL-GNZBNJ2PO5MGZ6GT
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-RS4RBKLTHTF2IUXJ -m comment --comment ns2/svc2:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
            -A KUBE-SEP-RS4RBKLTHTF2IUXJ -m comment --comment ns2/svc2:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
            -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.0.2:80" -j KUBE-SEP-RS4RBKLTHTF2IUXJ
            -A KUBE-SVL-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.0.2:80" -j KUBE-SEP-RS4RBKLTHTF2IUXJ
            COMMIT
            """),
        id="no cluster cidr"),
    pytest.param(
        # As upstream TestClusterIPGeneral's svc2: one port number, three protocols.
        [service("ns2", "svc2", clusterIP="172.30.0.42", ports=[
            {"name": "dns-udp", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
            {"name": "dns-sctp", "port": 53, "protocol": "SCTP"}])],
        [endpoint_slice("ns2", "svc2", [ep("10.180.0.1")], [
            {"name": "dns-udp", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 5353, "protocol": "TCP"},
            {"name": "dns-sctp", "port": 53, "protocol": "SCTP"}])],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-5BVYUR2PKHQSNHD4 - [0:0]
            :KUBE-SEP-7PIHC2I6DEQ4LZME - [0:0]
            :KUBE-SEP-AGOOXK46AE2PZZRJ - [0:0]
            :KUBE-SVC-56EGM3ZB4YILLRBZ - [0:0]
            :KUBE-SVC-EXOHH4R4NKJAMEOO - [0:0]
            :KUBE-SVC-L76IW5RJFPV7YBZO - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:dns-sctp cluster IP" -m sctp -p sctp -d 172.30.0.42 --dport 53 -j KUBE-SVC-L76IW5RJFPV7YBZO
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:dns-tcp cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 53 -j KUBE-SVC-EXOHH4R4NKJAMEOO
            -A KUBE-SERVICES -m comment --comment "ns2/svc2:dns-udp cluster IP" -m udp -p udp -d 172.30.0.42 --dport 53 -j KUBE-SVC-56EGM3ZB4YILLRBZ
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-5BVYUR2PKHQSNHD4 -m comment --comment ns2/svc2:dns-sctp -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-5BVYUR2PKHQSNHD4 -m comment --comment ns2/svc2:dns-sctp -m sctp -p sctp -j DNAT --to-destination 10.180.0.1:53
            -A KUBE-SEP-7PIHC2I6DEQ4LZME -m comment --comment ns2/svc2:dns-udp -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-7PIHC2I6DEQ4LZME -m comment --comment ns2/svc2:dns-udp -m udp -p udp -j DNAT --to-destination 10.180.0.1:53
            -A KUBE-SEP-AGOOXK46AE2PZZRJ -m comment --comment ns2/svc2:dns-tcp -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-AGOOXK46AE2PZZRJ -m comment --comment ns2/svc2:dns-tcp -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:5353
            -A KUBE-SVC-56EGM3ZB4YILLRBZ -m comment --comment "ns2/svc2:dns-udp cluster IP" -m udp -p udp -d 172.30.0.42 --dport 53 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-56EGM3ZB4YILLRBZ -m comment --comment "ns2/svc2:dns-udp -> 10.180.0.1:53" -j KUBE-SEP-7PIHC2I6DEQ4LZME
            -A KUBE-SVC-EXOHH4R4NKJAMEOO -m comment --comment "ns2/svc2:dns-tcp cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 53 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-EXOHH4R4NKJAMEOO -m comment --comment "ns2/svc2:dns-tcp -> 10.180.0.1:5353" -j KUBE-SEP-AGOOXK46AE2PZZRJ
            -A KUBE-SVC-L76IW5RJFPV7YBZO -m comment --comment "ns2/svc2:dns-sctp cluster IP" -m sctp -p sctp -d 172.30.0.42 --dport 53 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-L76IW5RJFPV7YBZO -m comment --comment "ns2/svc2:dns-sctp -> 10.180.0.1:53" -j KUBE-SEP-5BVYUR2PKHQSNHD4
            COMMIT
            """),
        id="udp and sctp"),
    pytest.param(
        [service("ns1", "svc1", ingress=[{"ip": "1.2.3.004"}], type="LoadBalancer", clusterIP="172.30.0.041",
                 externalIPs=["192.168.099.022"], loadBalancerSourceRanges=["203.0.113.000/025"],
                 ports=[{**P80, "nodePort": 3001}])],
        [endpoint_slice("ns1", "svc1", [ep("10.180.00.001")], [P80])],
        UPSTREAM, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            -A KUBE-PROXY-FIREWALL -m comment --comment "ns1/svc1:p80 traffic not accepted by KUBE-FW-XPGD46QRK7WJZT7O" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]
            :KUBE-FW-XPGD46QRK7WJZT7O - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3001 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 external IP" -m tcp -p tcp -d 192.168.99.22 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-FW-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade traffic for ns1/svc1:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 loadbalancer IP" -s 203.0.113.0/25 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "other traffic to ns1/svc1:p80 will be dropped by KUBE-PROXY-FIREWALL"
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
            COMMIT
            """),
        id="sloppy ips (upstream TestBadIPs)"),
    pytest.param(
        *large_cluster_case(999),  # 999 + 2 = 1001 endpoints > 1000
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns0/big:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.40 --dport 80 -j REJECT
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-BBOKFEU5MDWTCZJQ - [0:0]
            :KUBE-SEP-DKGQUZGBKLTPAR56 - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-BBOKFEU5MDWTCZJQ -s 10.0.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-BBOKFEU5MDWTCZJQ -m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80
            -A KUBE-SEP-DKGQUZGBKLTPAR56 -s 10.0.0.0 -j KUBE-MARK-MASQ
            -A KUBE-SEP-DKGQUZGBKLTPAR56 -m tcp -p tcp -j DNAT --to-destination 10.0.0.0:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-DKGQUZGBKLTPAR56
            -A KUBE-SVC-XPGD46QRK7WJZT7O -j KUBE-SEP-BBOKFEU5MDWTCZJQ
            COMMIT
            """),
        id="large cluster mode drops endpoint comments"),
    pytest.param(
        *large_cluster_case(998),  # 998 + 2 = 1000 endpoints: not over the threshold
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns0/big:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.40 --dport 80 -j REJECT
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-BBOKFEU5MDWTCZJQ - [0:0]
            :KUBE-SEP-DKGQUZGBKLTPAR56 - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-BBOKFEU5MDWTCZJQ -m comment --comment ns1/svc1:p80 -s 10.0.0.1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-BBOKFEU5MDWTCZJQ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80
            -A KUBE-SEP-DKGQUZGBKLTPAR56 -m comment --comment ns1/svc1:p80 -s 10.0.0.0 -j KUBE-MARK-MASQ
            -A KUBE-SEP-DKGQUZGBKLTPAR56 -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.0.0.0:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.0.0.0:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-DKGQUZGBKLTPAR56
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.0.0.1:80" -j KUBE-SEP-BBOKFEU5MDWTCZJQ
            COMMIT
            """),
        id="at the large cluster threshold comments stay"),
    pytest.param(
        [service("ns1", "headless", clusterIP="None", ports=[P80]),
         service("ns1", "ext", type="ExternalName", externalName="example.com", ports=[P80]),
         service("ns1", "other-proxy", labels={"service.kubernetes.io/service-proxy-name": "foo"},
                 clusterIP="172.30.0.9", ports=[P80])],
        [endpoint_slice("ns1", "headless", [ep("10.180.0.1")], [P80],
                        labels={"service.kubernetes.io/headless": ""})],
        CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            COMMIT
            """),
        id="headless externalname and service-proxy-name skipped"),
    pytest.param(
        [service("default", "clusterip-svc", clusterIP="10.96.100.10",
                 ports=[{"port": 5555, "protocol": "TCP", "targetPort": 5000}])],
        [endpoint_slice("default", "clusterip-svc", [ep("10.244.1.3", "node-1"), ep("10.244.1.4", "node-1"),
                                                     ep("10.244.2.3", "node-2")],
                        [{"name": "", "port": 5000, "protocol": "TCP"}])],
        ProxyConfig(node_name="node-1", node_ips=("172.18.0.2",), cluster_cidr="10.244.0.0/16"), golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-6KQQ2UDBB66ZDPVB - [0:0]
            :KUBE-SEP-LBPDPRON455IOEAA - [0:0]
            :KUBE-SEP-OYURAKJ4R7SNIIE4 - [0:0]
            :KUBE-SVC-M6YY5X4D5LM4YLQC - [0:0]
            -A KUBE-SERVICES -m comment --comment "default/clusterip-svc cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 5555 -j KUBE-SVC-M6YY5X4D5LM4YLQC
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-6KQQ2UDBB66ZDPVB -m comment --comment default/clusterip-svc -s 10.244.1.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-6KQQ2UDBB66ZDPVB -m comment --comment default/clusterip-svc -m tcp -p tcp -j DNAT --to-destination 10.244.1.3:5000
            -A KUBE-SEP-LBPDPRON455IOEAA -m comment --comment default/clusterip-svc -s 10.244.2.3 -j KUBE-MARK-MASQ
            -A KUBE-SEP-LBPDPRON455IOEAA -m comment --comment default/clusterip-svc -m tcp -p tcp -j DNAT --to-destination 10.244.2.3:5000
            -A KUBE-SEP-OYURAKJ4R7SNIIE4 -m comment --comment default/clusterip-svc -s 10.244.1.4 -j KUBE-MARK-MASQ
            -A KUBE-SEP-OYURAKJ4R7SNIIE4 -m comment --comment default/clusterip-svc -m tcp -p tcp -j DNAT --to-destination 10.244.1.4:5000
            -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 5555 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
            -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc -> 10.244.1.3:5000" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-6KQQ2UDBB66ZDPVB
            -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc -> 10.244.1.4:5000" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-OYURAKJ4R7SNIIE4
            -A KUBE-SVC-M6YY5X4D5LM4YLQC -m comment --comment "default/clusterip-svc -> 10.244.2.3:5000" -j KUBE-SEP-LBPDPRON455IOEAA
            COMMIT
            """),
        id="seed clusterip-svc three endpoints"),
    pytest.param(
        [], [], CONFIG, golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            COMMIT
            """),
        id="static rules"),
    pytest.param(
        # No --random-fully, localhost NodePorts off (no KUBE-FIREWALL, 127/8 excluded from
        # NodePorts), tcp_be_liberal (no INVALID drop), masquerade bit 15.
        [], [],
        ProxyConfig(random_fully=False, localhost_nodeports=False, conntrack_tcp_be_liberal=True, masquerade_bit=15),
        golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00008000/0x00008000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00008000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00008000/0x00008000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00008000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
            COMMIT
            """),
        id="static rules with other flags"),
    pytest.param(
        # One NodePorts jump per matching node address; loopback is an address of every node.
        [], [],
        dataclasses.replace(CONFIG, node_ips=("192.168.0.2", "192.168.1.2"),
                            nodeport_addresses=("192.168.0.0/24", "127.0.0.1/32", "2001:db8::/64")),
        golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FIREWALL - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 127.0.0.1 -j KUBE-NODEPORTS
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            COMMIT
            """),
        id="nodeport addresses"),
    pytest.param(
        [service("ns1", "svc1", type="NodePort", clusterIP="fd00:172:30::41", ports=[{**P80, "nodePort": 3001}])],
        [endpoint_slice("ns1", "svc1", [ep("fd00:10:180::1"), ep("fd00:10:180::2:1", NODE)], [P80],
                        address_type="IPv6"),
         endpoint_slice("ns1", "svc1", [ep("10.180.0.9")], [P80])],  # the IPv4 proxier's business
        ProxyConfig(node_name=NODE, node_ips=("192.168.0.2", "2001:db8::1"), cluster_cidr="fd00:10::/64",
                    ip_family="IPv6"),
        golden("""
            *filter
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXTERNAL-SERVICES - [0:0]
            :KUBE-FORWARD - [0:0]
            :KUBE-PROXY-FIREWALL - [0:0]
            -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
            -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
            COMMIT
            *nat
            :KUBE-NODEPORTS - [0:0]
            :KUBE-SERVICES - [0:0]
            :KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]
            :KUBE-MARK-MASQ - [0:0]
            :KUBE-POSTROUTING - [0:0]
            :KUBE-SEP-APSFVWOCYOGIDJM2 - [0:0]
            :KUBE-SEP-OGYCNMB4EMRUSJ6N - [0:0]
            :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
            -A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d fd00:172:30::41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS
            -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade traffic for ns1/svc1:p80 external destinations" -j KUBE-MARK-MASQ
            -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-XPGD46QRK7WJZT7O
            -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
            -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
            -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
            -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
            -A KUBE-SEP-APSFVWOCYOGIDJM2 -m comment --comment ns1/svc1:p80 -s fd00:10:180::2:1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-APSFVWOCYOGIDJM2 -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination [fd00:10:180::2:1]:80
            -A KUBE-SEP-OGYCNMB4EMRUSJ6N -m comment --comment ns1/svc1:p80 -s fd00:10:180::1 -j KUBE-MARK-MASQ
            -A KUBE-SEP-OGYCNMB4EMRUSJ6N -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination [fd00:10:180::1]:80
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d fd00:172:30::41 --dport 80 ! -s fd00:10::/64 -j KUBE-MARK-MASQ
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> [fd00:10:180::1]:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-OGYCNMB4EMRUSJ6N
            -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> [fd00:10:180::2:1]:80" -j KUBE-SEP-APSFVWOCYOGIDJM2
            COMMIT
            """),
        id="ipv6"),
]


@pytest.mark.parametrize(("services", "slices", "config", "expected"), GOLDEN)
def test_render_golden(services: list[Service], slices: list[EndpointSlice], config: ProxyConfig,
                       expected: str) -> None:
    ruleset = render(services, slices, config)
    assert canonical_sort(ruleset.text) == expected
    assert check_consistency(expected) == []


def test_reference_example_raw_payload() -> None:
    # With one service the raw emission order is deterministic: this is the reference's §4
    # example verbatim, chain lines and rules in kube-proxy's own order.
    ruleset = render([service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])],
                     [endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80])], CONFIG)
    assert ruleset.text == golden("""
        *filter
        :KUBE-SERVICES - [0:0]
        :KUBE-EXTERNAL-SERVICES - [0:0]
        :KUBE-FORWARD - [0:0]
        :KUBE-NODEPORTS - [0:0]
        :KUBE-PROXY-FIREWALL - [0:0]
        :KUBE-FIREWALL - [0:0]
        -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
        -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
        -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
        -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
        COMMIT
        *nat
        :KUBE-SERVICES - [0:0]
        :KUBE-NODEPORTS - [0:0]
        :KUBE-POSTROUTING - [0:0]
        :KUBE-MARK-MASQ - [0:0]
        :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
        :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
        -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
        -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
        -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
        -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
        -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
        -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
        -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
        -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
        -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
        -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
        COMMIT
        """)
    assert (ruleset.filter_rules, ruleset.nat_rules) == (4, 10)

def overall_inputs() -> tuple[list[Service], list[EndpointSlice]]:
    """Upstream TestOverallIPTablesRules: one service of each kind."""
    services = [
        service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80]),
        # LoadBalancer, eTP Local; its only endpoint has no nodeName, so it is not local.
        service("ns2", "svc2", ingress=[{"ip": "1.2.3.4"}], type="LoadBalancer", externalTrafficPolicy="Local",
                clusterIP="172.30.0.42", externalIPs=["192.168.99.22"], healthCheckNodePort=30000,
                ports=[{**P80, "nodePort": 3001}]),
        service("ns3", "svc3", type="NodePort", clusterIP="172.30.0.43", ports=[{**P80, "nodePort": 3003}]),
        service("ns4", "svc4", type="NodePort", clusterIP="172.30.0.44", externalIPs=["192.168.99.33"],
                ports=[{**P80, "targetPort": 80}]),
        # LoadBalancer, eTP Cluster: its healthCheckNodePort is ignored.
        service("ns5", "svc5", ingress=[{"ip": "5.6.7.8"}], type="LoadBalancer", externalTrafficPolicy="Cluster",
                clusterIP="172.30.0.45", healthCheckNodePort=30000, loadBalancerSourceRanges=[" 203.0.113.0/25"],
                sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 10800}},
                ports=[{**P80, "nodePort": 3002}]),
        service("ns6", "svc6", type="ClusterIP", clusterIP="172.30.0.46", ports=[{**P80, "targetPort": 80}]),
    ]
    slices = [
        endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80]),
        endpoint_slice("ns2", "svc2", [ep("10.180.0.2")], [P80]),
        endpoint_slice("ns3", "svc3", [ep("10.180.0.3")], [P80]),
        endpoint_slice("ns4", "svc4", [ep("10.180.0.4"), ep("10.180.0.5", NODE)], [P80]),
        endpoint_slice("ns5", "svc5", [ep("10.180.0.3")], [P80]),
    ]
    return services, slices


OVERALL = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-NODEPORTS -m comment --comment "ns2/svc2:p80 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT
    -A KUBE-SERVICES -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.46 --dport 80 -j REJECT
    -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local endpoints" -m tcp -p tcp -d 192.168.99.22 --dport 80 -j DROP
    -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local endpoints" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP
    -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3001 -j DROP
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    -A KUBE-PROXY-FIREWALL -m comment --comment "ns5/svc5:p80 traffic not accepted by KUBE-FW-NUKIZ6OKUXPJNT4C" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j DROP
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXT-4SW47YFZTEDKD3PK - [0:0]
    :KUBE-EXT-GNZBNJ2PO5MGZ6GT - [0:0]
    :KUBE-EXT-NUKIZ6OKUXPJNT4C - [0:0]
    :KUBE-EXT-X27LE4BHSL4DOUIK - [0:0]
    :KUBE-FW-NUKIZ6OKUXPJNT4C - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-C6EBXVWJJZMIWKLZ - [0:0]
    :KUBE-SEP-I77PXRDZVX7PMWMN - [0:0]
    :KUBE-SEP-OYPFS5VJICHGATKP - [0:0]
    :KUBE-SEP-RS4RBKLTHTF2IUXJ - [0:0]
    :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
    :KUBE-SEP-UKSFD7AGPMPPLUHC - [0:0]
    :KUBE-SVC-4SW47YFZTEDKD3PK - [0:0]
    :KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
    :KUBE-SVC-NUKIZ6OKUXPJNT4C - [0:0]
    :KUBE-SVC-X27LE4BHSL4DOUIK - [0:0]
    :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
    -A KUBE-NODEPORTS -m comment --comment ns2/svc2:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3001 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
    -A KUBE-NODEPORTS -m comment --comment ns2/svc2:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
    -A KUBE-NODEPORTS -m comment --comment ns3/svc3:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3003 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-X27LE4BHSL4DOUIK
    -A KUBE-NODEPORTS -m comment --comment ns3/svc3:p80 -m tcp -p tcp --dport 3003 -j KUBE-EXT-X27LE4BHSL4DOUIK
    -A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3002 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-NUKIZ6OKUXPJNT4C
    -A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp --dport 3002 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
    -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
    -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
    -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 external IP" -m tcp -p tcp -d 192.168.99.22 --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
    -A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
    -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
    -A KUBE-SERVICES -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp -p tcp -d 172.30.0.44 --dport 80 -j KUBE-SVC-4SW47YFZTEDKD3PK
    -A KUBE-SERVICES -m comment --comment "ns4/svc4:p80 external IP" -m tcp -p tcp -d 192.168.99.33 --dport 80 -j KUBE-EXT-4SW47YFZTEDKD3PK
    -A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 -j KUBE-SVC-NUKIZ6OKUXPJNT4C
    -A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-FW-NUKIZ6OKUXPJNT4C
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-EXT-4SW47YFZTEDKD3PK -m comment --comment "masquerade traffic for ns4/svc4:p80 external destinations" -j KUBE-MARK-MASQ
    -A KUBE-EXT-4SW47YFZTEDKD3PK -j KUBE-SVC-4SW47YFZTEDKD3PK
    -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "pod traffic for ns2/svc2:p80 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
    -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "masquerade LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
    -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "route LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
    -A KUBE-EXT-NUKIZ6OKUXPJNT4C -m comment --comment "masquerade traffic for ns5/svc5:p80 external destinations" -j KUBE-MARK-MASQ
    -A KUBE-EXT-NUKIZ6OKUXPJNT4C -j KUBE-SVC-NUKIZ6OKUXPJNT4C
    -A KUBE-EXT-X27LE4BHSL4DOUIK -m comment --comment "masquerade traffic for ns3/svc3:p80 external destinations" -j KUBE-MARK-MASQ
    -A KUBE-EXT-X27LE4BHSL4DOUIK -j KUBE-SVC-X27LE4BHSL4DOUIK
    -A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 203.0.113.0/25 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
    -A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "other traffic to ns5/svc5:p80 will be dropped by KUBE-PROXY-FIREWALL"
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
    -A KUBE-SEP-C6EBXVWJJZMIWKLZ -m comment --comment ns4/svc4:p80 -s 10.180.0.5 -j KUBE-MARK-MASQ
    -A KUBE-SEP-C6EBXVWJJZMIWKLZ -m comment --comment ns4/svc4:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.5:80
    -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
    -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -m recent --name KUBE-SEP-I77PXRDZVX7PMWMN --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
    -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
    -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
    -A KUBE-SEP-RS4RBKLTHTF2IUXJ -m comment --comment ns2/svc2:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
    -A KUBE-SEP-RS4RBKLTHTF2IUXJ -m comment --comment ns2/svc2:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
    -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
    -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
    -A KUBE-SEP-UKSFD7AGPMPPLUHC -m comment --comment ns4/svc4:p80 -s 10.180.0.4 -j KUBE-MARK-MASQ
    -A KUBE-SEP-UKSFD7AGPMPPLUHC -m comment --comment ns4/svc4:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.4:80
    -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp -p tcp -d 172.30.0.44 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.4:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-UKSFD7AGPMPPLUHC
    -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.5:80" -j KUBE-SEP-C6EBXVWJJZMIWKLZ
    -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.0.2:80" -j KUBE-SEP-RS4RBKLTHTF2IUXJ
    -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -m recent --name KUBE-SEP-I77PXRDZVX7PMWMN --rcheck --seconds 10800 --reap -j KUBE-SEP-I77PXRDZVX7PMWMN
    -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -j KUBE-SEP-I77PXRDZVX7PMWMN
    -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 -> 10.180.0.3:80" -j KUBE-SEP-OYPFS5VJICHGATKP
    -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
    COMMIT
    """)


def test_overall_upstream() -> None:
    ruleset = render(*overall_inputs(), UPSTREAM)
    assert canonical_sort(ruleset.text) == OVERALL
    assert check_consistency(OVERALL) == []
    # Metrics kube-proxy derives from the same sync.
    assert (ruleset.filter_rules, ruleset.nat_rules, ruleset.nat_rules_total) == (10, 55, 55)
    assert (ruleset.no_local_endpoints_internal, ruleset.no_local_endpoints_external) == (0, 1)
    assert ruleset.health_check_node_ports == (("ns2/svc2", 30000),)
    assert (ruleset.service_ports, ruleset.services_written, ruleset.endpoints_total) == (6, 6, 6)
    assert ruleset.full_sync and not ruleset.large_cluster_mode
    assert ruleset.active_nat_chains == {
        line[1:].split()[0] for line in OVERALL.split("*nat")[1].splitlines()
        if line.startswith(":KUBE-") and line[1:].startswith(("KUBE-SVC", "KUBE-SEP", "KUBE-EXT", "KUBE-FW"))}


def test_raw_layout_and_determinism() -> None:
    services, slices = overall_inputs()
    ruleset = render(services, slices, UPSTREAM)
    text = ruleset.text
    # Raw order (§4): filter then nat, each chains first; KUBE-FIREWALL's rule first; KUBE-FORWARD
    # last in filter; the static nat rules first and the NodePorts jump last in nat.
    filter_part, nat_part = text.split("COMMIT\n*nat\n")
    assert filter_part.splitlines()[:7] == [
        "*filter", ":KUBE-SERVICES - [0:0]", ":KUBE-EXTERNAL-SERVICES - [0:0]", ":KUBE-FORWARD - [0:0]",
        ":KUBE-NODEPORTS - [0:0]", ":KUBE-PROXY-FIREWALL - [0:0]", ":KUBE-FIREWALL - [0:0]"]
    assert filter_part.splitlines()[7].startswith("-A KUBE-FIREWALL ")
    assert filter_part.splitlines()[-1].startswith('-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conn')
    assert nat_part.splitlines()[:4] == [
        ":KUBE-SERVICES - [0:0]", ":KUBE-NODEPORTS - [0:0]", ":KUBE-POSTROUTING - [0:0]", ":KUBE-MARK-MASQ - [0:0]"]
    assert nat_part.splitlines()[-2].startswith('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports;')
    assert text.endswith("COMMIT\n")
    # Go walks a map; kubelab walks sorted service ports, so input order does not matter.
    assert render(services[::-1], slices[::-1], UPSTREAM).text == text


# --- partial sync (§11), upstream TestSyncProxyRulesRepeated ----------------------------------------

SVC1 = service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])
SVC2 = service("ns2", "svc2", clusterIP="172.30.0.42", ports=[{"name": "p8080", "port": 8080, "protocol": "TCP"}])
SVC3 = service("ns3", "svc3", clusterIP="172.30.0.43", ports=[P80])
EPS1 = endpoint_slice("ns1", "svc1", [ep("10.0.1.1")], [P80])
EPS2 = endpoint_slice("ns2", "svc2", [ep("10.0.2.1")], [{"name": "p8080", "port": 8080, "protocol": "TCP"}])
EPS3 = endpoint_slice("ns3", "svc3", [ep("10.0.3.1")], [P80])

REPEATED_FULL = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-SNQ3ZNILQDEJNDQO - [0:0]
    :KUBE-SEP-UHEGFW77JX3KXTOV - [0:0]
    :KUBE-SVC-2VJB64SDSIJUP5T6 - [0:0]
    :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
    -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
    -A KUBE-SERVICES -m comment --comment "ns2/svc2:p8080 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 8080 -j KUBE-SVC-2VJB64SDSIJUP5T6
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
    -A KUBE-SEP-SNQ3ZNILQDEJNDQO -m comment --comment ns1/svc1:p80 -s 10.0.1.1 -j KUBE-MARK-MASQ
    -A KUBE-SEP-SNQ3ZNILQDEJNDQO -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.0.1.1:80
    -A KUBE-SEP-UHEGFW77JX3KXTOV -m comment --comment ns2/svc2:p8080 -s 10.0.2.1 -j KUBE-MARK-MASQ
    -A KUBE-SEP-UHEGFW77JX3KXTOV -m comment --comment ns2/svc2:p8080 -m tcp -p tcp -j DNAT --to-destination 10.0.2.1:8080
    -A KUBE-SVC-2VJB64SDSIJUP5T6 -m comment --comment "ns2/svc2:p8080 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 8080 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-2VJB64SDSIJUP5T6 -m comment --comment "ns2/svc2:p8080 -> 10.0.2.1:8080" -j KUBE-SEP-UHEGFW77JX3KXTOV
    -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.0.1.1:80" -j KUBE-SEP-SNQ3ZNILQDEJNDQO
    COMMIT
    """)
REPEATED_ADD = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-BSWRHOQ77KEXZLNL - [0:0]
    :KUBE-SVC-X27LE4BHSL4DOUIK - [0:0]
    -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
    -A KUBE-SERVICES -m comment --comment "ns2/svc2:p8080 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 8080 -j KUBE-SVC-2VJB64SDSIJUP5T6
    -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
    -A KUBE-SEP-BSWRHOQ77KEXZLNL -m comment --comment ns3/svc3:p80 -s 10.0.3.1 -j KUBE-MARK-MASQ
    -A KUBE-SEP-BSWRHOQ77KEXZLNL -m comment --comment ns3/svc3:p80 -m tcp -p tcp -j DNAT --to-destination 10.0.3.1:80
    -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 -> 10.0.3.1:80" -j KUBE-SEP-BSWRHOQ77KEXZLNL
    COMMIT
    """)
REPEATED_DELETE = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-UHEGFW77JX3KXTOV - [0:0]
    :KUBE-SVC-2VJB64SDSIJUP5T6 - [0:0]
    -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
    -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
    -X KUBE-SEP-UHEGFW77JX3KXTOV
    -X KUBE-SVC-2VJB64SDSIJUP5T6
    COMMIT
    """)


def test_partial_sync_upstream() -> None:
    full = render([SVC1, SVC2], [EPS1, EPS2], UPSTREAM)
    assert canonical_sort(full.text) == REPEATED_FULL
    assert (full.nat_rules, full.nat_rules_total, full.services_written) == (15, 15, 2)

    # Add svc3: only its SVC/SEP chains are written; KUBE-SERVICES is still written whole.
    added = render([SVC1, SVC2, SVC3], [EPS1, EPS2, EPS3], UPSTREAM,
                   changed={"ns3/svc3"}, existing_nat_chains=full.active_nat_chains)
    assert canonical_sort(added.text) == REPEATED_ADD
    assert not added.full_sync
    assert (added.nat_rules, added.nat_rules_skipped, added.nat_rules_total) == (12, 8, 20)
    assert (added.service_ports, added.services_written) == (3, 1)
    # The chains of svc1 and svc2, absent from the payload, are still active.
    assert added.active_nat_chains == {
        "KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SEP-SNQ3ZNILQDEJNDQO",
        "KUBE-SVC-2VJB64SDSIJUP5T6", "KUBE-SEP-UHEGFW77JX3KXTOV",
        "KUBE-SVC-X27LE4BHSL4DOUIK", "KUBE-SEP-BSWRHOQ77KEXZLNL"}

    # Delete svc2: its chains are now stale and get flushed and deleted.
    deleted = render([SVC1, SVC3], [EPS1, EPS2, EPS3], UPSTREAM,
                     changed={"ns2/svc2"}, existing_nat_chains=added.active_nat_chains)
    assert canonical_sort(deleted.text) == REPEATED_DELETE
    assert (deleted.nat_rules, deleted.deleted_chains, deleted.nat_rules_total) == (7, 2, 15)
    assert deleted.active_nat_chains == {
        "KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SEP-SNQ3ZNILQDEJNDQO",
        "KUBE-SVC-X27LE4BHSL4DOUIK", "KUBE-SEP-BSWRHOQ77KEXZLNL"}


STALE = golden("""
    *filter
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXTERNAL-SERVICES - [0:0]
    :KUBE-FIREWALL - [0:0]
    :KUBE-FORWARD - [0:0]
    :KUBE-PROXY-FIREWALL - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    COMMIT
    *nat
    :KUBE-NODEPORTS - [0:0]
    :KUBE-SERVICES - [0:0]
    :KUBE-EXT-GONEGONEGONEGONE - [0:0]
    :KUBE-FW-GONEGONEGONEGONE - [0:0]
    :KUBE-MARK-MASQ - [0:0]
    :KUBE-POSTROUTING - [0:0]
    :KUBE-SEP-GONEGONEGONEGONE - [0:0]
    :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
    :KUBE-SVC-GONEGONEGONEGONE - [0:0]
    :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
    :KUBE-SVL-GONEGONEGONEGONE - [0:0]
    -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
    -A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
    -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
    -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
    -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
    -X KUBE-EXT-GONEGONEGONEGONE
    -X KUBE-FW-GONEGONEGONEGONE
    -X KUBE-SEP-GONEGONEGONEGONE
    -X KUBE-SVC-GONEGONEGONEGONE
    -X KUBE-SVL-GONEGONEGONEGONE
    COMMIT
    """)


def test_stale_chain_deletion_only_touches_service_chains() -> None:
    existing = frozenset({
        "KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",  # fixed chains
        "KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SEP-SXIVWICOYRO3J4NJ",  # still active
        "KUBE-SVC-GONEGONEGONEGONE", "KUBE-SVL-GONEGONEGONEGONE", "KUBE-EXT-GONEGONEGONEGONE",
        "KUBE-FW-GONEGONEGONEGONE", "KUBE-SEP-GONEGONEGONEGONE",  # stale
        "KUBE-XLB-GONEGONEGONEGONE", "DOCKER", "CNI-HOSTPORT-DNAT",  # not ours
    })
    ruleset = render([service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80])],
                     [endpoint_slice("ns1", "svc1", [ep("10.180.0.1")], [P80])], CONFIG,
                     existing_nat_chains=existing)
    assert canonical_sort(ruleset.text) == STALE
    assert ruleset.deleted_chains == 5
    # In the raw payload the -X lines precede the final NodePorts jump, as in kube-proxy.
    nat_lines = ruleset.text.split("*nat\n")[1].splitlines()
    assert nat_lines[-7:-2] == ["-X KUBE-EXT-GONEGONEGONEGONE", "-X KUBE-FW-GONEGONEGONEGONE",
                                "-X KUBE-SEP-GONEGONEGONEGONE", "-X KUBE-SVC-GONEGONEGONEGONE",
                                "-X KUBE-SVL-GONEGONEGONEGONE"]


def test_large_cluster_mode_flag() -> None:
    assert render(*large_cluster_case(999), CONFIG).large_cluster_mode
    assert render(*large_cluster_case(999), CONFIG).endpoints_total == 1001
    assert not render(*large_cluster_case(998), CONFIG).large_cluster_mode


def test_render_does_not_touch_inputs() -> None:
    services, slices = overall_inputs()
    before = [o.to_dict() for o in (*services, *slices)]
    render(services, slices, UPSTREAM, changed={"ns1/svc1"}, existing_nat_chains=frozenset({"KUBE-SVC-X"}))
    assert [o.to_dict() for o in (*services, *slices)] == before


def test_jump_rules_table() -> None:
    # §3, in order: prepending each yields FORWARD = PROXY-FIREWALL, FORWARD, SERVICES, EXTERNAL-SERVICES.
    assert [(j.table, j.src_chain, j.dst_chain) for j in JUMP_RULES] == [
        ("filter", "INPUT", "KUBE-EXTERNAL-SERVICES"), ("filter", "FORWARD", "KUBE-EXTERNAL-SERVICES"),
        ("filter", "INPUT", "KUBE-NODEPORTS"), ("filter", "FORWARD", "KUBE-SERVICES"),
        ("filter", "OUTPUT", "KUBE-SERVICES"), ("filter", "FORWARD", "KUBE-FORWARD"),
        ("filter", "INPUT", "KUBE-PROXY-FIREWALL"), ("filter", "OUTPUT", "KUBE-PROXY-FIREWALL"),
        ("filter", "FORWARD", "KUBE-PROXY-FIREWALL"), ("nat", "OUTPUT", "KUBE-SERVICES"),
        ("nat", "PREROUTING", "KUBE-SERVICES"), ("nat", "POSTROUTING", "KUBE-POSTROUTING"),
        ("filter", "INPUT", "KUBE-FIREWALL"), ("filter", "OUTPUT", "KUBE-FIREWALL"),
    ]
    assert JUMP_RULES[0].args() == ("-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                    "kubernetes externally-visible service portals", "-j", "KUBE-EXTERNAL-SERVICES")
    assert JUMP_RULES[2].args() == ("-m", "comment", "--comment", "kubernetes health check service ports",
                                    "-j", "KUBE-NODEPORTS")
    assert JUMP_RULES[-1].args() == ("-j", "KUBE-FIREWALL")


def test_duplicate_endpoint_across_slices_local_copy_wins() -> None:
    # The same ip:port in two slices (a pod moving between slices): EndpointSliceCache keeps the
    # first copy unless a later one is local, so the endpoint counts as local here whichever slice
    # kube-proxy happens to read first.
    svc = service("ns1", "svc1", clusterIP="172.30.0.41", ports=[P80], internalTrafficPolicy="Local")
    remote = endpoint_slice("ns1", "svc1", [ep("10.180.0.1", "other-node")], [P80])
    local = endpoint_slice("ns1", "svc1", [ep("10.180.0.1", NODE)], [P80])
    local.metadata.name = "svc1-zzzzz"  # read after the remote copy

    ruleset = render([svc], [remote, local], CONFIG)

    assert ruleset.no_local_endpoints_internal == 0
    assert '-A KUBE-SVL-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" ' \
           "-j KUBE-SEP-SXIVWICOYRO3J4NJ" in ruleset.text.splitlines()
    # Neither copy local: the endpoint is remote, and iTP Local drops cluster-IP traffic.
    elsewhere = endpoint_slice("ns1", "svc1", [ep("10.180.0.1", "third-node")], [P80])
    elsewhere.metadata.name = "svc1-zzzzz"
    assert render([svc], [remote, elsewhere], CONFIG).no_local_endpoints_internal == 1
