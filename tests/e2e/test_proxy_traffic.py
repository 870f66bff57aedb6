"""Real packets through rendered kube-proxy rules (root), on iptables-nft and iptables-legacy.

One lab per backend (separate namespaces: a namespace is driven by one backend at a time):

    node-1   10.240.0.11  pods web-a 10.244.1.5, web-b 10.244.1.6    <- the rules under test
    node-2   10.240.0.12  pod  web-c 10.244.2.5                       (no kube-proxy rules)
    client   10.240.0.2   outside the cluster; routes the service CIDR via node-1

node-1's rules are `render()`ed for node-1 (cluster CIDR 10.244.0.0/16) and loaded with
IptablesApplier: the jumps, then one iptables-restore. Each pod's server answers with its name and
an X-Client-Address header, which shows whether the proxy rules masqueraded the connection.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from proxyobjects import endpoint_slice, ep, port, service
from pyroute2 import netns as pyroute2_netns

from kubeletstub.netnames import exec_argv
from kubeletstub.netns import LabNetwork
from kubeletstub.netnsstate import cleanup
from proxyagent import ProxyConfig, render
from proxyagent.apply import IptablesApplier
from proxyagent.canonical import check_consistency

pytestmark = pytest.mark.root

NODE_1, NODE_2, CLIENT = "10.240.0.11", "10.240.0.12", "10.240.0.2"
PODS = {"web-a": ("node-1", "10.244.1.5"), "web-b": ("node-1", "10.244.1.6"), "web-c": ("node-2", "10.244.2.5")}
HTTP = [port("http", 80, targetPort=5000)]
TARGET = [port("http", 5000)]


def nodeport(number: int) -> list[dict[str, object]]:
    return [port("http", 80, targetPort=5000, nodePort=number)]


def backends_of(*pods: str) -> list[dict[str, object]]:
    return [ep(PODS[p][1], PODS[p][0]) for p in pods]


SERVICES = [
    service("default", "web", cluster_ip="10.96.0.100", svc_type="NodePort", ports=nodeport(30080)),
    service("default", "sticky", cluster_ip="10.96.0.101", ports=HTTP, sessionAffinity="ClientIP",
            sessionAffinityConfig={"clientIP": {"timeoutSeconds": 10800}}),
    service("default", "empty", cluster_ip="10.96.0.102", svc_type="NodePort", ports=nodeport(30082)),
    service("default", "elsewhere", cluster_ip="10.96.0.103", svc_type="NodePort", ports=nodeport(30083),
            externalTrafficPolicy="Local"),
    service("default", "solo", cluster_ip="10.96.0.104", svc_type="NodePort", ports=nodeport(30084),
            externalTrafficPolicy="Local"),
]
SLICES = [
    endpoint_slice("default", "web", backends_of("web-a", "web-b", "web-c"), TARGET),
    endpoint_slice("default", "sticky", backends_of("web-a", "web-b", "web-c"), TARGET),
    endpoint_slice("default", "elsewhere", backends_of("web-c"), TARGET),  # none on node-1
    endpoint_slice("default", "solo", backends_of("web-b"), TARGET),  # only on node-1
]
CONFIG = ProxyConfig(node_name="node-1", node_ips=(NODE_1,), cluster_cidr="10.244.0.0/16")


@dataclass(frozen=True)
class Lab:
    net: LabNetwork
    backend: str
    client: str  # the client's namespace

    def node(self, name: str) -> str:
        return self.net.node_netns(name)

    def pod(self, name: str) -> str:
        return self.net.pod_netns(PODS[name][0], f"default/{name}")


@dataclass(frozen=True)
class Reply:
    code: int  # curl's exit code: 0 ok, 7 could not connect (refused), 28 timed out
    pod: str
    client_ip: str
    error: str


def curl(netns: str, url: str, *, max_time: float = 5) -> Reply:
    argv = exec_argv(netns, ["curl", "-sS", "--max-time", str(max_time), "-D", "-", url])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=max_time + 20, check=False)
    head, _, body = done.stdout.partition("\n\n")  # text mode turned the CRLFs into \n
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines()[1:])}
    return Reply(done.returncode, body.strip(), headers.get("x-client-address", "").rsplit(":", 1)[0],
                 done.stderr.strip())


@contextmanager
def lab_network(tmp_path_factory: pytest.TempPathFactory, *tools: str,
                client_routes: dict[str, str] | None = None) -> Iterator[tuple[LabNetwork, str]]:
    """The lab above with no proxy rules yet: (the network, the client's namespace). Root and `tools`
    are required; every namespace is gone afterwards, whatever happened. Shared with the nftables
    mode's traffic tests (test_nft_traffic.py)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    for tool in ("ip", "curl", *tools):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH")
    prefix = f"klx-{secrets.token_hex(3)}"
    state_dir = Path(tmp_path_factory.mktemp("proxylab"))
    net = LabNetwork(prefix, state_dir)
    try:
        net.create()
        net.add_node("node-1", NODE_1, "10.244.1.0/24")
        net.add_node("node-2", NODE_2, "10.244.2.0/24")
        net.add_node_route("node-1", "10.244.2.0/24", NODE_2)
        net.add_node_route("node-2", "10.244.1.0/24", NODE_1)
        for name, (node, ip) in PODS.items():
            net.add_pod(node, f"default/{name}", ip, ports=[5000])
        # An outside client that sends service traffic to node-1, as a static route to the service
        # CIDR (what kube-proxy's off-cluster masquerade rule is for) would.
        client = net.add_client("client", CLIENT, routes={"10.96.0.0/12": NODE_1, **(client_routes or {})})
        # The client's service traffic enters node-1 by eth0 and, unanswered, leaves by eth0 again:
        # Linux then sends the client an ICMP redirect, and that redirect spends the per-host ICMP
        # rate-limit tokens, so the port-unreachable of a REJECT would be suppressed (a kernel
        # matter, not kube-proxy's). Like most routers, node-1 sends no redirects.
        subprocess.run(exec_argv(net.node_netns("node-1"), [
            "sysctl", "-q", "-w", "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0"]),
            check=True)
        yield net, client
    finally:
        try:
            net.destroy()
            cleanup(state_dir, prefix=prefix, force=True)
        finally:
            leftovers = [n for n in pyroute2_netns.listnetns() if n.startswith(f"{prefix}-")]
            for name in leftovers:
                pyroute2_netns.remove(name)
            assert not leftovers, f"network namespaces left behind: {leftovers}"


@pytest.fixture(scope="module", params=["iptables-nft", "iptables-legacy"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    backend: str = request.param
    with lab_network(tmp_path_factory, backend, f"{backend}-restore") as (net, client):
        payload = render(SERVICES, SLICES, CONFIG).text
        assert check_consistency(payload) == []
        applier = IptablesApplier(net.node_netns("node-1"), backend=backend)

        async def program() -> None:
            await applier.enable_route_localnet()
            await applier.ensure_jumps()
            await applier.restore(payload)

        asyncio.run(program())
        yield Lab(net, backend, client)


def test_rules_were_loaded_by_the_backend_under_test(lab: Lab) -> None:
    other = "iptables-legacy" if lab.backend == "iptables-nft" else "iptables-nft"
    ours = subprocess.run(exec_argv(lab.node("node-1"), [f"{lab.backend}-save", "-t", "nat"]),
                          capture_output=True, text=True, check=True).stdout
    theirs = subprocess.run(exec_argv(lab.node("node-1"), [f"{other}-save", "-t", "nat"]),
                            capture_output=True, text=True, check=False).stdout
    assert "KUBE-SERVICES" in ours
    assert "KUBE-SERVICES" not in theirs


def test_cluster_ip_spreads_over_every_endpoint(lab: Lab) -> None:
    seen = Counter(curl(lab.node("node-1"), "http://10.96.0.100/").pod for _ in range(40))
    assert set(seen) == {"web-a", "web-b", "web-c"}, seen


def test_node_port_on_the_node_ip(lab: Lab) -> None:
    replies = [curl(lab.client, f"http://{NODE_1}:30080/") for _ in range(30)]
    assert {r.code for r in replies} == {0}, [r.error for r in replies if r.code]
    assert {r.pod for r in replies} == {"web-a", "web-b", "web-c"}
    # eTP Cluster: always masqueraded, so the reply finds its way back through node-1.
    assert CLIENT not in {r.client_ip for r in replies}


def test_client_ip_affinity_keeps_a_client_on_one_endpoint(lab: Lab) -> None:
    from_client = {curl(lab.client, "http://10.96.0.101/").pod for _ in range(15)}
    from_node = {curl(lab.node("node-1"), "http://10.96.0.101/").pod for _ in range(15)}

    assert len(from_client) == 1 and from_client <= {"web-a", "web-b", "web-c"}
    assert len(from_node) == 1 and from_node <= {"web-a", "web-b", "web-c"}


_CONNECT = """
import errno, socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[3]))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("CONNECTED")
except socket.timeout:
    print("TIMEOUT")
except OSError as exc:
    print(errno.errorcode.get(exc.errno, str(exc.errno)))
"""


def connect(netns: str, ip: str, port_number: int, *, timeout: float = 10) -> str:
    """What a TCP connect from `netns` ends in: CONNECTED, TIMEOUT or the errno's name."""
    argv = exec_argv(netns, [sys.executable, "-c", _CONNECT, ip, str(port_number), str(timeout)])
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 20, check=True).stdout.strip()


def test_service_without_endpoints_is_rejected(lab: Lab) -> None:
    # REJECT: the connection is refused (an ICMP port-unreachable), it does not time out.
    assert connect(lab.client, "10.96.0.102", 80) == "ECONNREFUSED"
    assert connect(lab.client, NODE_1, 30082) == "ECONNREFUSED"
    assert connect(lab.pod("web-a"), "10.96.0.102", 80) == "ECONNREFUSED"
    assert connect(lab.node("node-1"), "10.96.0.102", 80) == "ECONNREFUSED"
    reply = curl(lab.client, "http://10.96.0.102/", max_time=10)
    assert reply.code == 7, reply  # curl's "couldn't connect", not 28 "timed out"


def test_external_traffic_policy_local_drops_without_a_local_endpoint(lab: Lab) -> None:
    external = curl(lab.client, f"http://{NODE_1}:30083/", max_time=3)
    internal = curl(lab.pod("web-a"), "http://10.96.0.103/")

    assert external.code == 28, external  # DROPped: no answer at all, curl times out
    assert connect(lab.client, NODE_1, 30083, timeout=2) == "TIMEOUT"
    assert (internal.code, internal.pod) == (0, "web-c")  # cluster-internal traffic is not affected


def test_masquerade_only_what_comes_from_outside_the_cluster_cidr(lab: Lab) -> None:
    from_outside = curl(lab.client, "http://10.96.0.104/")
    from_a_pod = curl(lab.pod("web-a"), "http://10.96.0.104/")
    node_port_local = curl(lab.client, f"http://{NODE_1}:30084/")

    # Off-cluster source to the cluster IP: SNATed to node-1's address towards the pod (the
    # gateway address every pod veth of node-1 carries).
    assert (from_outside.pod, from_outside.client_ip) == ("web-b", "10.244.1.1")
    # A pod's own traffic keeps its source.
    assert (from_a_pod.pod, from_a_pod.client_ip) == ("web-b", "10.244.1.5")
    # eTP Local NodePort: the client's own address reaches the pod.
    assert (node_port_local.pod, node_port_local.client_ip) == ("web-b", CLIENT)
