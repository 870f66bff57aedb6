"""The pure parts of the health-check NodePorts (proxyagent/healthcheck.py): where they listen, which
Services get one, the local ready endpoints counted as upstream's LocalReadyEndpoints, the answer."""

from __future__ import annotations

import json

from proxyobjects import endpoint_slice, ep, listed, port, service

from proxyagent import Proxier, ProxyConfig
from proxyagent.healthcheck import health_check_ports, listen_addresses, local_ready_endpoints, respond
from proxyagent.nftproxier import nft_config_of

CONFIG = ProxyConfig(node_name="node-1", node_ips=("10.240.0.11", "fd00::11"))


def test_listen_addresses_follow_nodeport_addresses() -> None:
    assert listen_addresses(CONFIG) == ("0.0.0.0",)  # iptables mode: every address
    assert listen_addresses(nft_config_of(CONFIG)) == ("10.240.0.11",)  # nftables mode: "primary"
    assert listen_addresses(ProxyConfig(node_ips=("10.240.0.11",), nodeport_addresses=("192.0.2.0/24",))) == ()
    assert listen_addresses(ProxyConfig(node_ips=("10.240.0.11",), nodeport_addresses=("0.0.0.0/0",))) == ("0.0.0.0",)


def test_local_ready_endpoints_sum_over_ports_as_upstream() -> None:
    ports = [port("a", 80), port("b", 81)]
    svc = service("default", "web", cluster_ip="10.96.0.5", ports=ports, svc_type="LoadBalancer",
                  externalTrafficPolicy="Local", healthCheckNodePort=30999)
    eps = endpoint_slice("default", "web", [ep("10.244.1.5", "node-1"), ep("10.244.1.6", "node-1", ready=False),
                                            ep("10.244.2.5", "node-2")], [port("a", 8080), port("b", 8081)])
    other = service("default", "plain", cluster_ip="10.96.0.6", ports=[port("a", 80)])
    proxier = listed(Proxier(CONFIG, min_sync_period=0), [svc, eps, other])
    pairs = sorted({(sp.service_key, sp.health_check_node_port) for sp in proxier.state.service_ports()})
    wanted = health_check_ports(pairs)
    assert wanted == {"default/web": 30999}
    # One local ready endpoint, counted once per port (kubernetes#106713).
    assert local_ready_endpoints(wanted, proxier.state.ports_of, proxier.state.endpoints_map()) == {"default/web": 2}


def test_answer() -> None:
    status, headers, body = respond("ns-1/web", 0, True)
    assert status == 503 and headers["X-Load-Balancing-Endpoint-Weight"] == "0"
    assert json.loads(body) == {"service": {"namespace": "ns-1", "name": "web"}, "localEndpoints": 0,
                                "serviceProxyHealthy": True}
    assert respond("ns-1/web", 3, True)[0] == 200
    assert respond("ns-1/web", 3, False)[0] == 503
    assert not body.endswith(b"\n")
