"""A real multi-node dataplane: pods on three nodes, reached across nodes, through ClusterIPs and NodePorts,
from nodes, pods and an outside client; a node whose heartbeats stop loses its pods from the endpoints
and from every node's rules; nothing remains after Ctrl-C (checked by the `cluster` fixture)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from kubelab_cluster import Cluster, wait_for

KUBELAB_UP_ARGS = ("--node-monitor-grace-period", "6")
MANIFEST = Path(__file__).parent / "manifests" / "multinode.yaml"
PODS = {"web-1": "node-1", "web-2": "node-2", "web-3": "node-3"}
NODE_IPS = {"node-1": "10.240.0.11", "node-2": "10.240.0.12", "node-3": "10.240.0.13"}


@pytest.fixture(scope="module")
def web(cluster: Cluster) -> dict[str, str]:
    """The manifest applied and its pods Running and in every node's rules; pod name -> pod IP."""
    cluster.kubectl("apply", "-f", str(MANIFEST))

    def running() -> dict[str, str] | None:
        items = cluster.kubectl_json("get", "pods", "-l", "app=web")["items"]
        ips = {p["metadata"]["name"]: p["status"].get("podIP") for p in items
               if p["status"].get("phase") == "Running" and any(
                   c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))}
        return ips if set(ips) == set(PODS) else None

    ips = wait_for("web pods Running and Ready", running)
    for node in NODE_IPS:
        wait_for(f"{node} to program all three endpoints",
                 lambda node=node: all(f"{ip}:8080" in cluster.iptables_save(node) for ip in ips.values()))
    return ips


def test_pods_run_where_they_were_pinned(cluster: Cluster, web: dict[str, str]) -> None:
    items = cluster.kubectl_json("get", "pods", "-l", "app=web")["items"]
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items} == PODS


def test_pod_ip_reachable_from_another_node(cluster: Cluster, web: dict[str, str]) -> None:
    assert cluster.curl("node-2", f"http://{web['web-1']}:8080/") == "web-1"
    assert cluster.curl("node-3", f"http://{web['web-2']}:8080/") == "web-2"


def test_pod_to_pod_across_nodes(cluster: Cluster, web: dict[str, str]) -> None:
    assert cluster.curl("web-1", f"http://{web['web-3']}:8080/") == "web-3"


def test_cluster_ip_from_every_node_reaches_all_pods(cluster: Cluster, web: dict[str, str]) -> None:
    ip = cluster.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    for node in NODE_IPS:
        seen: set[str] = set()
        wait_for(f"ClusterIP {ip}:80 from {node} to reach every pod",
                 lambda node=node, seen=seen: seen.add(cluster.curl(node, f"http://{ip}:80/")) or set(PODS) <= seen,
                 interval=0)


def test_pod_reaches_itself_through_its_service(cluster: Cluster, web: dict[str, str]) -> None:
    """Hairpin: kube-proxy's KUBE-SEP rule marks the packet for SNAT, so web-1 answers itself."""
    ip = cluster.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    seen: set[str] = set()
    wait_for("web-1 to reach itself through the ClusterIP",
             lambda: seen.add(cluster.curl("web-1", f"http://{ip}:80/")) or "web-1" in seen, interval=0)


def test_nodeport_from_another_node_and_from_outside(cluster: Cluster, web: dict[str, str]) -> None:
    assert cluster.curl("node-2", f"http://{NODE_IPS['node-1']}:30080/") in PODS
    seen: set[str] = set()
    wait_for("NodePort on node-3 from the outside client to reach every pod",
             lambda: seen.add(cluster.curl("client", f"http://{NODE_IPS['node-3']}:30080/")) or set(PODS) <= seen,
             interval=0)


def test_loadbalancer_ip_from_outside(cluster: Cluster, web: dict[str, str]) -> None:
    """The lab's "cloud" gives the LoadBalancer Service an ingress IP from its pool; the outside client,
    whose route to the pool goes through node-1 as a cloud LB forwards to nodes, reaches every pod."""
    lb_ip = wait_for("an ingress IP for web-lb", lambda: cluster.kubectl(
        "get", "svc", "web-lb", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}").stdout)
    assert lb_ip.startswith("172.18.255."), lb_ip
    assert lb_ip in cluster.kubectl("get", "svc", "web-lb").stdout  # the EXTERNAL-IP column
    seen: set[str] = set()
    wait_for(f"{lb_ip}:80 from the client to reach every pod",
             lambda: seen.add(cluster.curl("client", f"http://{lb_ip}:80/")) or set(PODS) <= seen, interval=0)


def test_load_is_spread_evenly(cluster: Cluster, web: dict[str, str]) -> None:
    """300 requests through the ClusterIP: kube-proxy's 1/3, 1/2, 1 probabilities give each pod about a third."""
    ip = cluster.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    script = f"for i in $(seq 300); do curl -s --max-time 2 http://{ip}:80/; done"
    out = cluster.exec("node-1", "sh", "-c", script).stdout.split()
    counts = collections.Counter(out)
    assert sum(counts.values()) == 300, counts
    assert set(counts) == set(PODS), counts
    assert min(counts.values()) >= 60, f"a pod got under 20% of 300 requests: {counts}"


def test_client_ip_affinity_keeps_a_client_on_one_pod(cluster: Cluster, web: dict[str, str]) -> None:
    ip = cluster.kubectl("get", "svc", "web-sticky", "-o", "jsonpath={.spec.clusterIP}").stdout
    nat = cluster.iptables_save("node-2")
    assert "-m recent" in nat and "--seconds 10800" in nat, "no ClientIP affinity rules on node-2"
    answers = [cluster.curl("node-2", f"http://{ip}:8080/") for _ in range(20)]
    assert len(set(answers)) == 1 and answers[0] in PODS, answers


def test_node_without_heartbeats_loses_its_pods(cluster: Cluster, web: dict[str, str]) -> None:
    """Pause node-3's kubelet stub and proxy agent: after the grace period the node is NotReady, its pod
    leaves the Endpoints and every other node's rules; resumed, it comes back."""
    cluster.kubelab("pause", "--data-dir", str(cluster.data_dir), "node-3")
    gone = web["web-3"]
    try:
        wait_for("node-3 to turn NotReady", lambda: "NotReady" in cluster.kubectl("get", "node", "node-3").stdout,
                 timeout=60)
        wait_for("web-3 to leave the Endpoints", lambda: gone not in cluster.kubectl(
            "get", "endpoints", "web", "-o", "jsonpath={.subsets[*].addresses[*].ip}").stdout)
        for node in ("node-1", "node-2"):
            wait_for(f"web-3 to leave {node}'s rules", lambda node=node: gone not in cluster.iptables_save(node))
        taints = cluster.kubectl("get", "node", "node-3", "-o", "jsonpath={.spec.taints[*].key}").stdout
        assert "node.kubernetes.io/unreachable" in taints
        answers = {cluster.curl("node-1", f"http://{web['web-1']}:8080/")} | {
            cluster.curl("client", f"http://{NODE_IPS['node-1']}:30080/") for _ in range(15)}
        assert "web-3" not in answers
    finally:
        cluster.kubelab("resume", "--data-dir", str(cluster.data_dir), "node-3")
    wait_for("node-3 Ready again", lambda: cluster.kubectl(
        "get", "node", "node-3", "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}").stdout == "True")
    wait_for("web-3 back in the Endpoints", lambda: gone in cluster.kubectl(
        "get", "endpoints", "web", "-o", "jsonpath={.subsets[*].addresses[*].ip}").stdout)
