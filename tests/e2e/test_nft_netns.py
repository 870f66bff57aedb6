"""kube-proxy's nftables transactions against the real `nft` (root), each in a network namespace of its
own: the kernel takes the full sync, a restart's sync over a populated table, a partial sync and the
later deletion of stale chains; `nft list table ip kube-proxy` then holds what the table model says;
and a connection to a ClusterIP really reaches the endpoint the verdict maps send it to.

Every namespace and process is created here and removed in a finally, whatever happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from nfttable import element_key
from proxyobjects import endpoint_slice, ep, port, service
from scratchns import scratch_netns

from kubelab.models import EndpointSlice, Service
from proxyagent.nftables import NftConfig, NftTable, apply_transaction, render_nft

pytestmark = pytest.mark.root

CONFIG = NftConfig(node_name="node-1", node_ips=("10.240.0.11",), cluster_cidr="10.244.0.0/16",
                   nodeport_addresses=("primary",), service_cidrs=("10.96.0.0/12",))


@pytest.fixture
def netns() -> Iterator[str]:
    with scratch_netns("klnft", tools=("ip", "nft")) as name:
        yield name


def nft(ns: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, "nft", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def apply(ns: str, transaction: str) -> None:
    done = nft(ns, "-f", "-", stdin=transaction)
    assert done.returncode == 0, done.stderr


def kernel_table(ns: str) -> dict[str, Any]:
    """`nft -j list table ip kube-proxy`: chains (hook, priority, rule count) and sets/maps (element keys)."""
    done = nft(ns, "-j", "list", "table", "ip", "kube-proxy")
    assert done.returncode == 0, done.stderr
    chains: dict[str, Any] = {}
    sets: dict[str, set[str]] = {}
    for item in json.loads(done.stdout)["nftables"]:
        if "chain" in item:
            c = item["chain"]
            chains[c["name"]] = [c.get("hook"), c.get("prio"), 0]
        elif "rule" in item:
            chains[item["rule"]["chain"]][2] += 1
        elif "set" in item or "map" in item:
            s = item.get("set") or item.get("map")
            sets[s["name"]] = {element_key(e) for e in s.get("elem") or []}
    return {"chains": chains, "sets": sets}


def model_table(table: NftTable) -> dict[str, Any]:
    """The same view of the table model."""
    hooks = {"filter-prerouting": ("prerouting", -110), "filter-input": ("input", -110),
             "filter-forward": ("forward", -110), "filter-output": ("output", -110),
             "filter-output-post-dnat": ("output", -90), "nat-prerouting": ("prerouting", -100),
             "nat-output": ("output", -100), "nat-postrouting": ("postrouting", 100)}
    chains = {name: [*hooks.get(name, (None, None)), len(chain.rules)] for name, chain in table.chains.items()}
    return {"chains": chains, "sets": {name: set(s.elements) for name, s in table.sets.items()}}


def objects() -> tuple[list[Service], list[EndpointSlice]]:
    http = [port("http", 80)]
    services = [
        service("default", "web", cluster_ip="10.96.100.100", ports=[port("http", 5555)]),
        service("default", "sticky", cluster_ip="10.96.100.101", ports=http, sessionAffinity="ClientIP",
                sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}}),
        service("default", "np", cluster_ip="10.96.100.102", svc_type="NodePort", externalTrafficPolicy="Local",
                ports=[port("http", 80, nodePort=30080)]),
        service("default", "lb", cluster_ip="10.96.100.103", svc_type="LoadBalancer",
                ports=[port("http", 80, nodePort=30081)], ingress=[{"ip": "192.0.2.10"}],
                loadBalancerSourceRanges=["10.240.0.0/16"], externalIPs=["192.0.2.20"]),
        service("default", "empty", cluster_ip="10.96.100.104", ports=http),
    ]
    slices = [
        endpoint_slice("default", "web", [ep("10.244.1.3"), ep("10.244.1.4"), ep("10.244.2.3")],
                       [port("", 5000)]),
        endpoint_slice("default", "sticky", [ep("10.244.1.5", "node-1"), ep("10.244.2.5")], [port("http", 8080)]),
        endpoint_slice("default", "np", [ep("10.244.2.6", "node-2")], [port("http", 8080)]),
        endpoint_slice("default", "lb", [ep("10.244.1.7", "node-1")], [port("http", 8080)]),
    ]
    return services, slices


def test_the_kernel_takes_full_partial_and_restart_syncs(netns: str) -> None:
    services, slices = objects()
    first = render_nft(services, slices, CONFIG, first_sync=True)
    apply(netns, first.text)
    model = apply_transaction(None, first.text)
    assert kernel_table(netns) == model_table(model)

    # A partial sync: web loses an endpoint, lb is deleted, empty gains one.
    services2 = [s for s in services if s.name != "lb"]
    slices2 = [endpoint_slice("default", "web", [ep("10.244.1.3"), ep("10.244.2.3")], [port("", 5000)]),
               endpoint_slice("default", "empty", [ep("10.244.1.9")], [port("http", 80)])] + [
        s for s in slices if s.name.split("-")[0] in ("sticky", "np")]
    existing = set(kernel_table(netns)["chains"])
    partial = render_nft(services2, slices2, CONFIG, changed={"default/web", "default/lb", "default/empty"},
                         previous_elements=first.elements, existing_chains=frozenset(existing),
                         existing_sets=frozenset(kernel_table(netns)["sets"]))
    apply(netns, partial.text)
    model = apply_transaction(model, partial.text)
    assert kernel_table(netns) == model_table(model)
    assert partial.stale_chains  # lb's and web's dropped endpoint's chains: flushed, still there
    # ... and deleted by a later transaction, as kube-proxy does once they have been stale a while.
    later = "".join(f"delete chain ip kube-proxy {c}\n" for c in partial.stale_chains)
    apply(netns, later)
    model = apply_transaction(model, later)
    assert kernel_table(netns) == model_table(model)
    assert model.dump() == apply_transaction(None, render_nft(services2, slices2, CONFIG).text).dump()

    # A restarted kube-proxy's first sync over the populated table: base chains recreated, all rewritten.
    restart = render_nft(services2, slices2, CONFIG, first_sync=True, existing_chains=frozenset(model.chains),
                         existing_sets=frozenset(model.sets))
    apply(netns, restart.text)
    assert kernel_table(netns) == model_table(apply_transaction(None, render_nft(services2, slices2, CONFIG).text))


def test_a_cluster_ip_connection_reaches_its_endpoint(netns: str) -> None:
    """The seed's Service with one endpoint local to the namespace: the nat-output hook sends the
    connection through service-ips, the service chain's numgen map and the endpoint chain's DNAT."""
    run = ["ip", "netns", "exec", netns]
    for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", "pod0", "type", "veth", "peer", "name", "pod1"],
                ["ip", "addr", "add", "10.244.1.3/32", "dev", "pod0"], ["ip", "link", "set", "pod0", "up"],
                ["ip", "link", "set", "pod1", "up"],
                ["ip", "route", "add", "default", "dev", "pod0"]):
        subprocess.run([*run, *cmd], check=True)
    services = [service("default", "web", cluster_ip="10.96.100.100", ports=[port("", 5555)])]
    slices = [endpoint_slice("default", "web", [ep("10.244.1.3", "node-1")], [port("", 5000)])]
    apply(netns, render_nft(services, slices, CONFIG, first_sync=True).text)
    server = subprocess.Popen([*run, sys.executable, "-c", (
        "import http.server, socketserver\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'endpoint 10.244.1.3')\n"
        "    def log_message(self, *a): pass\n"
        "s = socketserver.TCPServer(('10.244.1.3', 5000), H); print('ready', flush=True); s.serve_forever()\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        got = subprocess.run([*run, sys.executable, "-c", (
            "import urllib.request\n"
            "print(urllib.request.urlopen('http://10.96.100.100:5555/', timeout=10).read().decode())\n")],
            capture_output=True, text=True, timeout=60, check=False)
        assert (got.returncode, got.stdout.strip()) == (0, "endpoint 10.244.1.3"), got.stderr
        # A port the ClusterIP does not serve is rejected (cluster-ips-check), not left to time out.
        refused = subprocess.run([*run, sys.executable, "-c", (
            "import socket\n"
            "s = socket.create_connection(('10.96.100.100', 80), timeout=10)\n")],
            capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode != 0 and "Connection refused" in refused.stderr, refused.stderr
    finally:
        server.kill()
        server.wait(timeout=30)
