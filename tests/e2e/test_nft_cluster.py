"""The first seed's experiment in kube-proxy's nftables mode: `kubelab up --proxy-mode nftables`.

Every node's proxy agent runs the nftables proxier, which programs the node's network namespace
with one `nft -f` transaction per sync. `kubectl apply` the Service clusterip-svc and its three
pods; then `kubelab nftables NODE` (`nft list table ip kube-proxy` in the node) shows the Service's
ClusterIP in the `service-ips` verdict map and its chain dispatching with `numgen random mod 3
vmap` to three endpoint chains that DNAT to the pods; a pod reaches all three through the
ClusterIP; and no iptables rule of kube-proxy's is anywhere. Deleting a pod (a partial sync) turns
the vmap into `mod 2` on every node, and the deleted pod is never reached again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kubelab_cluster import Cluster, wait_for

KUBELAB_UP_ARGS = ("--proxy-mode", "nftables")
MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "clusterip-svc.yaml"
PODS = ("api-1", "api-2", "api-3")
NODES = ("node-1", "node-2", "node-3")


def _pod_ips(cluster: Cluster) -> dict[str, str]:
    items = cluster.kubectl_json("get", "pods", "-l", "app=api-container")["items"]
    return {p["metadata"]["name"]: p["status"].get("podIP", "") for p in items
            if p["status"].get("phase") == "Running" and p["metadata"].get("deletionTimestamp") is None}


def _nft(cluster: Cluster, node: str) -> str:
    return cluster.kubelab("nftables", "--data-dir", str(cluster.data_dir), node).stdout


def _curls(cluster: Cluster, target: str, url: str, count: int = 12) -> list[str]:
    """`count` HTTP GETs from inside `target`'s namespace in one `kubelab exec` (a process each would
    spend its time starting Python on a loaded machine); each answer's body, "FAILED" for a failed one."""
    script = f"for i in $(seq {count}); do curl -s --max-time 3 {url} || printf FAILED; echo; done"
    out = cluster.exec(target, "sh", "-c", script, check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def _dispatch(table: str, cluster_ip: str) -> tuple[str, list[str], dict[str, str]]:
    """The service chain service-ips sends the ClusterIP to, its numgen vmap arms (in order), and
    each endpoint chain's DNAT target."""
    m = re.search(rf"{re.escape(cluster_ip)} \. tcp \. 5555 : goto (service-\w+-default/clusterip-svc/tcp/)", table)
    assert m, f"no service-ips element for {cluster_ip}:5555 in:\n{table}"
    chain = m.group(1)
    body = re.search(rf"chain {re.escape(chain)} {{\n(.*?)\n\t}}", table, re.DOTALL)
    assert body, table
    vmap = re.search(r"numgen random mod (\d+) vmap \{ (.*?) \}", body.group(1))
    assert vmap, body.group(1)
    arms = re.findall(r"(\d+) : goto (\S+?)(?:,|$| )", vmap.group(2))
    assert [int(i) for i, _ in arms] == list(range(int(vmap.group(1)))), vmap.group(0)
    targets = {}
    for _, ep_chain in arms:
        dnat = re.search(rf"chain {re.escape(ep_chain)} {{.*?dnat to (\S+)", table, re.DOTALL)
        assert dnat, f"no DNAT in {ep_chain}:\n{table}"
        targets[ep_chain] = dnat.group(1)
    return chain, [c for _, c in arms], targets


def test_seed_service_through_nftables(cluster: Cluster) -> None:
    applied = cluster.kubectl("apply", "-f", str(MANIFEST)).stdout
    assert "service/clusterip-svc created" in applied
    def three_running() -> dict[str, str] | None:
        ips = _pod_ips(cluster)
        return ips if set(ips) == set(PODS) else None

    pods = wait_for("three api pods Running", three_running, timeout=60)
    cluster_ip = cluster.kubectl("get", "svc", "clusterip-svc", "-o", "jsonpath={.spec.clusterIP}").stdout
    endpoints = sorted(f"{ip}:5000" for ip in pods.values())

    def programmed(node: str, want: list[str]) -> Any:
        table = _nft(cluster, node)
        if not all(f"dnat to {ep}" in table for ep in want):
            return None
        _, arms, targets = _dispatch(table, cluster_ip)
        return table if sorted(targets.values()) == want and len(arms) == len(want) else None

    for node in NODES:
        table = wait_for(f"nftables rules for three endpoints on {node}", lambda node=node: programmed(node, endpoints))
        assert "table ip kube-proxy" in table
        _, arms, targets = _dispatch(table, cluster_ip)
        # kube-proxy's order: endpoints sorted as strings, each a third of new connections.
        assert [targets[c] for c in arms] == endpoints
        assert re.search(rf"numgen random mod 3 vmap \{{ 0 : goto {re.escape(arms[0])}, 1 : goto "
                         rf"{re.escape(arms[1])}, 2 : goto {re.escape(arms[2])} \}}", table), table
        # No iptables rule of kube-proxy's: this node is programmed by nftables only.
        assert "KUBE-SERVICES" not in cluster.iptables_save(node)

    # A pod reaches all three pods through the ClusterIP (one of them hairpins back to itself).
    url = f"http://{cluster_ip}:5555/"
    seen: set[str] = set()

    def all_reached() -> bool:
        seen.update(_curls(cluster, "api-1", url))
        return set(PODS) <= seen

    wait_for(f"curl {url} from pod api-1 to reach {PODS}", all_reached, timeout=180, interval=0)
    assert seen - {"FAILED"} == set(PODS)

    # Delete a pod: a partial sync on every node turns the vmap into `mod 2` over the other two.
    gone = f"{pods['api-2']}:5000"
    cluster.kubectl("delete", "pod", "api-2")
    left = [ep for ep in endpoints if ep != gone]
    for node in NODES:
        table = wait_for(f"{gone} to leave {node}'s vmap", lambda node=node: programmed(node, left))
        _, arms, targets = _dispatch(table, cluster_ip)
        assert [targets[c] for c in arms] == left
        assert "numgen random mod 2 vmap" in table
    answers = _curls(cluster, "api-1", url)
    assert set(answers) == {"api-1", "api-3"}, answers


SERVICE_CIDR_YAML = """apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata:
  name: m-cidr-second
spec:
  cidrs: [10.250.0.0/16]
"""


def test_service_cidr_objects_reach_every_node(cluster: Cluster) -> None:
    """`kubectl apply` a second ServiceCIDR: every node's drop rule for unallocated ClusterIPs holds
    its range too (the agents' shared ServiceCIDR informer); deleted, it leaves every node again."""
    both, default = "ip daddr { 10.96.0.0/12, 10.250.0.0/16 } drop", "ip daddr 10.96.0.0/12 drop"
    for node in NODES:
        wait_for(f"the default range in {node}'s drop rule", lambda node=node: default in _nft(cluster, node))
    cluster.kubectl("apply", "-f", "-", input=SERVICE_CIDR_YAML)
    try:
        for node in NODES:
            wait_for(f"the second range in {node}'s drop rule", lambda node=node: both in _nft(cluster, node))
    finally:
        cluster.kubectl("delete", "servicecidr", "m-cidr-second", "--wait=false")
    for node in NODES:
        wait_for(f"the second range to leave {node}", lambda node=node: default in _nft(cluster, node))


def test_health_check_node_port_answers_per_node(cluster: Cluster) -> None:
    """A LoadBalancer Service with externalTrafficPolicy Local over the seed's pods: asked from the lab
    client, each node's healthCheckNodePort answers 200 with its local endpoint count where a pod of
    the Service runs, 503 where none does (kube-proxy's ServiceHealthServer, in nftables mode)."""
    cluster.kubectl("apply", "-f", "-", input="""apiVersion: v1
kind: Service
metadata:
  name: hc-local
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: api-container}
  ports: [{port: 80, targetPort: 5000}]
""")
    try:
        hc = int(cluster.kubectl("get", "svc", "hc-local", "-o", "jsonpath={.spec.healthCheckNodePort}").stdout)
        cluster.kubectl("apply", "-f", str(MANIFEST))  # the seed's pods (again, if a test above deleted one)

        def settled() -> list[Any] | None:
            pods = [p for p in cluster.kubectl_json("get", "pods", "-l", "app=api-container")["items"]
                    if p["metadata"].get("deletionTimestamp") is None]
            return pods if pods and all(p["status"].get("phase") == "Running" for p in pods) else None

        per_node: dict[str, int] = {}
        for p in wait_for("the seed's pods Running", settled, timeout=90):
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        for index, node in enumerate(NODES, start=1):
            url = f"http://10.240.0.{10 + index}:{hc}/"
            want = "200" if per_node.get(node) else "503"
            script = f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 {url}"
            wait_for(f"{url} ({node}) to answer {want}",
                     lambda script=script, want=want: cluster.exec("client", "sh", "-c", script,
                                                                   check=False).stdout.strip() == want)
            body = cluster.exec("client", "curl", "-s", "--max-time", "3", url, check=False).stdout
            assert f'"localEndpoints": {per_node.get(node, 0)}' in body, body
    finally:
        cluster.kubectl("delete", "svc", "hc-local")
