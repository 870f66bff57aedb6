"""Health-check NodePorts (proxyagent/healthcheck.py, kube-proxy's ServiceHealthServer) served by both
proxiers in a network namespace of their own (root), asked with real HTTP requests from inside it:
200 with the local endpoint count while the node has a ready local endpoint, 503 when it has none or
the proxier itself is unhealthy, the port moved when spec.healthCheckNodePort changes, closed with the
Service, and a port held by another process neither fails the sync nor is forgotten (opened at the
next sync once free).

The namespace fixture is test_proxy_sync_iptables.py's.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import subprocess
from typing import Any

import pytest
from proxyobjects import endpoint_slice, ep, listed, port, service
from test_proxy_sync_iptables import netns  # noqa: F401 - the fixture

from kubelab.models import EndpointSlice, Service
from kubelab.netnsthread import run_in_netns
from proxyagent import NftProxier, Proxier, ProxyConfig
from proxyagent.healthcheck import ServiceHealthServer, listen_addresses
from proxyagent.nftables.apply import RecordingNftApplier

pytestmark = pytest.mark.root

NODE_IP = "10.240.0.11"
CONFIG = ProxyConfig(node_name="node-1", node_ips=(NODE_IP,), cluster_cidr="10.244.0.0/16")
HC, HC2 = 30999, 31001


def lb_service(hc: int) -> Service:
    return service("default", "web", cluster_ip="10.96.0.50", svc_type="LoadBalancer",
                   ports=[port("http", 80, nodePort=30080)], externalTrafficPolicy="Local",
                   healthCheckNodePort=hc, ingress=[{"ip": "192.0.2.10"}])


def web_slice(local_ready: bool) -> EndpointSlice:
    return endpoint_slice("default", "web", [ep("10.244.1.5", "node-1", ready=local_ready),
                                             ep("10.244.2.5", "node-2")], [port("http", 8080)])


def get(ns: str, address: str, hc: int) -> tuple[int, dict[str, str], bytes] | None:
    """GET from inside the namespace; None when the connection is refused."""
    def ask() -> tuple[int, dict[str, str], bytes] | None:
        conn = http.client.HTTPConnection(address, hc, timeout=30)
        try:
            conn.request("GET", "/")
            answer = conn.getresponse()
            return answer.status, dict(answer.getheaders()), answer.read()
        except ConnectionRefusedError:
            return None
        finally:
            conn.close()

    return run_in_netns(ns, ask, name="hc-client")


def make(mode: str, ns: str) -> Proxier:
    if mode == "nftables":
        proxier: Proxier = NftProxier(CONFIG, RecordingNftApplier(), min_sync_period=0)
        addresses = listen_addresses(proxier.nft_config)  # type: ignore[attr-defined]
    else:
        proxier = Proxier(CONFIG, min_sync_period=0)
        addresses = listen_addresses(CONFIG)
    proxier.health = ServiceHealthServer(node_name="node-1", addresses=addresses, netns=ns,
                                         healthy=proxier.is_healthy)
    return proxier


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_health_check_node_port(mode: str, netns: str) -> None:  # noqa: F811 - the imported fixture
    ns = netns
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    # A veth pair with both ends inside (no dummy driver here), gone with the namespace.
    subprocess.run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer"], check=True)
    subprocess.run(["ip", "-n", ns, "addr", "add", f"{NODE_IP}/24", "dev", "eth0"], check=True)
    for link in ("eth0", "eth0-peer"):
        subprocess.run(["ip", "-n", ns, "link", "set", link, "up"], check=True)
    # nftables mode's --nodeport-addresses default is "primary" (the node IP); iptables mode's every address.
    expected = (NODE_IP,) if mode == "nftables" else ("0.0.0.0",)

    async def main() -> None:
        proxier = listed(make(mode, ns), [lb_service(HC), web_slice(True)])
        assert proxier.health is not None and proxier.health.addresses == expected
        try:
            assert await proxier.sync_proxy_rules() is not None or mode == "nftables"
            answer = await asyncio.to_thread(get, ns, NODE_IP, HC)
            assert answer is not None
            status, headers, body = answer
            assert status == 200
            assert headers["Content-Type"] == "application/json"
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["X-Load-Balancing-Endpoint-Weight"] == "1"
            assert body == (b'{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n'
                            b'\t"localEndpoints": 1,\n\t"serviceProxyHealthy": true\n}')
            assert json.loads(body)["localEndpoints"] == 1

            # The local endpoint is not ready: the load balancer must skip this node.
            proxier.on_slice("MODIFIED", web_slice(True), web_slice(False))
            await proxier.sync_proxy_rules()
            answer = await asyncio.to_thread(get, ns, NODE_IP, HC)
            assert answer is not None and answer[0] == 503 and json.loads(answer[2])["localEndpoints"] == 0

            # Ready again, but the proxier is unhealthy (a sync queued for longer than 2 * syncPeriod).
            proxier.on_slice("MODIFIED", web_slice(False), web_slice(True))
            await proxier.sync_proxy_rules()
            proxier.oldest_pending_queued = 1.0
            answer = await asyncio.to_thread(get, ns, NODE_IP, HC)
            assert answer is not None and answer[0] == 503
            assert json.loads(answer[2]) == {"service": {"namespace": "default", "name": "web"},
                                             "localEndpoints": 1, "serviceProxyHealthy": False}
            proxier.oldest_pending_queued = None

            # A port held by someone else: the sync is applied all the same, the check waits for it.
            blocker = run_in_netns(ns, lambda: _listen(NODE_IP, HC2))
            try:
                syncs = proxier.syncs
                proxier.on_service("MODIFIED", lb_service(HC), lb_service(HC2))
                await proxier.sync_proxy_rules()
                assert proxier.syncs == syncs + 1
                assert await asyncio.to_thread(get, ns, NODE_IP, HC) is None  # the old port is closed
                assert proxier.health.ports == {}
            finally:
                blocker.close()
            proxier.request_sync()
            await proxier.sync_proxy_rules()
            assert proxier.health.ports == {"default/web": HC2}
            answer = await asyncio.to_thread(get, ns, NODE_IP, HC2)
            assert answer is not None and answer[0] == 200

            # The Service goes: so does its health check.
            proxier.on_service("DELETED", lb_service(HC2), None)
            await proxier.sync_proxy_rules()
            assert await asyncio.to_thread(get, ns, NODE_IP, HC2) is None
        finally:
            await proxier.health.close()

    asyncio.run(main())


def _listen(address: str, number: int) -> Any:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((address, number))
    sock.listen(1)
    return sock


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_agent_serves_the_port_the_api_server_allocated(mode: str, netns: str, apiserver: str) -> None:  # noqa: F811
    """A render-mode agent (`kubelab up` wiring: health_checks, health_netns) against a real API server:
    the healthCheckNodePort the API server allocated answers 200 once the node has a ready endpoint."""
    from kubelab import kinds
    from kubelab.client import ApiClient
    from proxyagent import ProxyAgent

    ns = netns
    subprocess.run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer"], check=True)
    subprocess.run(["ip", "-n", ns, "addr", "add", f"{NODE_IP}/24", "dev", "eth0"], check=True)
    for link in ("lo", "eth0", "eth0-peer"):
        subprocess.run(["ip", "-n", ns, "link", "set", link, "up"], check=True)
    name = f"hc-{mode}"

    async def main() -> None:
        async with ApiClient(apiserver) as api:
            created = await api.create(kinds.SERVICES, {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
                "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": {"app": name},
                         "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
            hc = created.spec.health_check_node_port
            assert hc
            await api.create(kinds.ENDPOINTSLICES, {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": f"{name}-abc", "namespace": "default",
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["10.244.1.5"], "nodeName": "node-1", "conditions": {"ready": True}}]})
            agent = ProxyAgent(api, CONFIG, min_sync_period=0, proxy_mode=mode, health_checks=True, health_netns=ns)
            task = asyncio.create_task(agent.run())
            try:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 90
                answer = None
                while answer is None or answer[0] != 200:
                    assert loop.time() < deadline, f"no 200 on the health check port {hc}: {answer}"
                    await asyncio.sleep(0.05)
                    answer = await asyncio.to_thread(get, ns, NODE_IP, hc)
                assert json.loads(answer[2])["service"] == {"namespace": "default", "name": name}
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await api.delete(kinds.ENDPOINTSLICES, f"{name}-abc", "default")
                await api.delete(kinds.SERVICES, name, "default")
            # The agent stopped: its health checks closed with it.
            assert await asyncio.to_thread(get, ns, NODE_IP, hc) is None

    asyncio.run(main())
