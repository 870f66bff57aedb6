"""The first seed's experiment, replayed for real: a ClusterIP Service is kube-proxy's iptables rules.

`kubectl apply` the Service clusterip-svc (port 5555 -> targetPort 5000, selector app=api-container)
and three pods with cpu/memory requests; then look where the article looks: the Endpoints, the
nat table inside a node (`iptables-save -t nat`, whose probabilities read 0.33333333349 and
0.50000000000 exactly as in the article), and curl through the ClusterIP, which must reach every pod.
Deleting a pod removes its rules, and it is never reached again.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from kubelab_cluster import Cluster, wait_for

MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "clusterip-svc.yaml"
PODS = ("api-1", "api-2", "api-3")
NODES = ("node-1", "node-2", "node-3")


def _running_pods(cluster: Cluster) -> dict[str, dict[str, str]]:
    items = cluster.kubectl_json("get", "pods", "-l", "app=api-container")["items"]
    running = {p["metadata"]["name"]: {"node": p["spec"].get("nodeName", ""), "ip": p["status"].get("podIP", "")}
               for p in items if p["status"].get("phase") == "Running"}
    return running if set(running) == set(PODS) else {}


def _svc_chain_rules(nat: str) -> tuple[str, list[str]]:
    """The KUBE-SVC chain KUBE-SERVICES jumps to for the Service's cluster IP, and that chain's rules."""
    jump = re.search(r'^-A KUBE-SERVICES .*--comment "default/clusterip-svc cluster IP".* -j (KUBE-SVC-\w+)$', nat,
                     re.MULTILINE)
    assert jump, f"no KUBE-SERVICES rule for default/clusterip-svc in:\n{nat}"
    chain = jump.group(1)
    return chain, [line for line in nat.splitlines() if line.startswith(f"-A {chain} ")]


def test_seed_clusterip_service(cluster: Cluster) -> None:
    # 1. kubectl apply, as the article does.
    applied = cluster.kubectl("apply", "-f", str(MANIFEST)).stdout
    assert "service/clusterip-svc created" in applied
    for pod in PODS:
        assert f"pod/{pod} created" in applied

    # 2. The scheduler placed the pods on nodes, the kubelets run them with IPs from each node's podCIDR.
    pods = wait_for("three api pods Running", lambda: _running_pods(cluster), timeout=60)
    for name, pod in pods.items():
        assert pod["node"] in NODES, f"{name} is on {pod['node']!r}"
        node_cidr = ipaddress.ip_network(cluster.state["nodes"][pod["node"]]["podCIDR"])
        assert ipaddress.ip_address(pod["ip"]) in node_cidr, f"{name} has {pod['ip']}, not in {node_cidr}"
    table = cluster.kubectl("get", "pods", "-o", "wide").stdout
    for name, pod in pods.items():
        assert re.search(rf"^{name}\s+1/1\s+Running\s+0\s+\S+\s+{re.escape(pod['ip'])}\s+{pod['node']}\s", table,
                         re.MULTILINE), table

    # 3. The Endpoints list the three pod IPs on the target port.
    pod_ips = {pod["ip"] for pod in pods.values()}

    def three_addresses() -> Any:
        ep = cluster.kubectl_json("get", "endpoints", "clusterip-svc")
        addresses = {a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []}
        return ep if addresses == pod_ips else None

    endpoints = wait_for("Endpoints with three addresses", three_addresses)
    assert [p["port"] for p in endpoints["subsets"][0]["ports"]] == [5000]
    cluster_ip = cluster.kubectl("get", "svc", "clusterip-svc", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network("10.96.0.0/12")

    # 4. iptables-save -t nat inside every node: KUBE-SVC jumps to three KUBE-SEP chains, in kube-proxy's
    #    order (endpoints sorted as strings), with the article's comments and probabilities.
    expected_order = sorted(f"{ip}:5000" for ip in pod_ips)
    for node in NODES:
        def programmed(node: str = node) -> str | None:
            nat = cluster.iptables_save(node)
            return nat if all(f"default/clusterip-svc -> {ep}" in nat for ep in expected_order) else None

        nat = wait_for(f"rules for three endpoints on {node}", programmed)
        _chain, rules = _svc_chain_rules(nat)
        dispatch = [r for r in rules if "-> " in r]
        assert len(dispatch) == 3, rules
        probabilities = ["--probability 0.33333333349", "--probability 0.50000000000", None]
        seps = []
        for rule, endpoint, probability in zip(dispatch, expected_order, probabilities, strict=True):
            assert f'--comment "default/clusterip-svc -> {endpoint}"' in rule, rule
            if probability:
                assert f"-m statistic --mode random {probability}" in rule, rule
            else:
                assert "statistic" not in rule, rule
            sep = rule.rsplit(" -j ", 1)[1]
            assert sep.startswith("KUBE-SEP-"), rule
            seps.append(sep)
            assert re.search(rf"^-A {sep} .*-j DNAT --to-destination {re.escape(endpoint)}$", nat, re.MULTILINE), \
                f"no DNAT to {endpoint} in {sep}:\n{nat}"
        assert len(set(seps)) == 3

    # 5. curl to the ClusterIP from a node reaches all three pods.
    url = f"http://{cluster_ip}:5555/"
    seen: set[str] = set()

    def all_reached() -> bool:
        seen.add(cluster.curl("node-1", url))
        return set(PODS) <= seen

    wait_for(f"curl {url} from node-1 to reach {PODS}", all_reached, timeout=60, interval=0)
    assert seen - {""} == set(PODS)

    # 6. Delete one pod: its rules go from every node, and it is never reached again.
    gone_ip = pods["api-2"]["ip"]
    cluster.kubectl("delete", "pod", "api-2")
    for node in NODES:
        wait_for(f"{gone_ip} to leave {node}'s rules", lambda node=node: gone_ip not in cluster.iptables_save(node))
        nat = cluster.iptables_save(node)
        _, rules = _svc_chain_rules(nat)
        dispatch = [r for r in rules if "-> " in r]
        assert len(dispatch) == 2 and "--probability 0.50000000000" in dispatch[0], rules
    ep = cluster.kubectl_json("get", "endpoints", "clusterip-svc")
    assert {a["ip"] for s in ep["subsets"] for a in s["addresses"]} == pod_ips - {gone_ip}
    answers = [cluster.curl("node-1", url) for _ in range(30)]
    assert "api-2" not in answers
    assert set(answers) == {"api-1", "api-3"}, answers
