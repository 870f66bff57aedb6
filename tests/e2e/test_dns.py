"""Cluster DNS for real: a resolver inside a pod's network namespace asks 10.96.0.10.

`kubelab up --dataplane netns` runs the DNS server in its own namespace on the lab network (10.240.0.3),
behind the kube-dns Service, whose ClusterIP the proxy agents DNAT there. Every pod's resolv.conf is
Kubernetes' (search <ns>.svc.cluster.local svc.cluster.local cluster.local, ndots:5), bind-mounted by
`ip netns exec`. The checks run dnspython's resolver (the system resolver's configuration, real UDP and
TCP to 10.96.0.10) and curl inside a client pod: A, SRV, headless, NXDOMAIN vs NODATA, the search path.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubelab_cluster import Cluster, wait_for

# Not "client": `kubelab exec client` means the lab's outside host.
POD = "dns-client"

MANIFESTS = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "echo"},
     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "echo"}},
              "template": {"metadata": {"labels": {"app": "echo"}},
                           "spec": {"containers": [{"name": "echo", "image": "busybox:1.36",
                                                    "ports": [{"name": "http", "containerPort": 8080}]}]}}}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
     "spec": {"selector": {"app": "echo"}, "ports": [{"name": "http", "port": 5555, "targetPort": "http"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-headless"},
     "spec": {"clusterIP": "None", "selector": {"app": "echo"},
              "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody"},
     "spec": {"clusterIP": "None", "selector": {"app": "nobody"}, "ports": [{"port": 80}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dns-client"},
     "spec": {"containers": [{"name": "client", "image": "busybox:1.36"}]}},
]

# Runs inside the client pod's namespace: the resolver reads the pod's /etc/resolv.conf.
PROBE = textwrap.dedent("""
    import json, sys
    import dns.flags, dns.message, dns.query, dns.rcode, dns.resolver

    resolver = dns.resolver.Resolver()
    server = resolver.nameservers[0]
    out = {"nameservers": resolver.nameservers, "search": [str(s) for s in resolver.search]}

    def ask(name, rdtype, tcp=False):
        query = dns.message.make_query(name, rdtype)
        response = (dns.query.tcp if tcp else dns.query.udp)(query, server, timeout=5)
        return {"rcode": dns.rcode.to_text(response.rcode()), "aa": bool(response.flags & dns.flags.AA),
                "answer": sorted(rd.to_text() for rrset in response.answer for rd in rrset),
                "authority": [rrset.to_text() for rrset in response.authority],
                "additional": sorted(rrset.to_text() for rrset in response.additional)}

    for key, name, rdtype in json.loads(sys.argv[1]):
        out[key] = ask(name, rdtype)
    out["tcp"] = ask("echo.default.svc.cluster.local.", "A", tcp=True)
    out["search_a"] = sorted(r.to_text() for r in resolver.resolve("echo", "A", search=True))
    out["search_other_ns"] = sorted(r.to_text() for r in resolver.resolve("kube-dns.kube-system", "A",
                                                                          search=True))
    print(json.dumps(out))
""")


def ready_pods(cluster: Cluster, selector: str, count: int) -> dict[str, str] | None:
    items = cluster.kubectl_json("get", "pods", "-l", selector)["items"]
    ready = {p["metadata"]["name"]: p["status"].get("podIP", "") for p in items
             if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])}
    return ready if len(ready) == count == len(items) else None


@pytest.fixture(scope="module")
def lab(cluster: Cluster) -> Cluster:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(MANIFESTS))
    cluster.kubectl("rollout", "status", "deployment/echo", "--timeout=120s")
    wait_for("the client pod", lambda: cluster.kubectl("get", "pod", "dns-client", "-o",
                                                        "jsonpath={.status.phase}").stdout == "Running", timeout=60)
    return cluster


def probe(cluster: Cluster, queries: list[tuple[str, str, str]]) -> dict[str, Any]:
    result = cluster.exec(POD, sys.executable, "-c", PROBE, json.dumps(queries))
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_kube_dns_service_has_kubeadms_shape(lab: Cluster) -> None:
    svc = lab.kubectl_json("get", "svc", "kube-dns", "-n", "kube-system")
    assert svc["spec"]["clusterIP"] == "10.96.0.10"
    assert svc["metadata"]["labels"] == {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                                         "kubernetes.io/name": "CoreDNS"}
    assert [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [
        ("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")]
    ep = lab.kubectl_json("get", "endpoints", "kube-dns", "-n", "kube-system")
    assert [a["ip"] for a in ep["subsets"][0]["addresses"]] == ["10.240.0.3"]
    # The node's proxy agent programs it once it has seen the EndpointSlice: on a loaded machine, a moment
    # after the Endpoints are written.
    rule = '"kube-system/kube-dns:dns -> 10.240.0.3:53"'
    wait_for("node-1's rule to kube-dns", lambda: rule in lab.iptables_save("node-1"), timeout=60)


def test_pod_resolv_conf(lab: Cluster) -> None:
    resolv = lab.exec(POD, "cat", "/etc/resolv.conf").stdout
    assert resolv == ("search default.svc.cluster.local svc.cluster.local cluster.local\n"
                      "nameserver 10.96.0.10\noptions ndots:5\n")
    prefix = lab.state["netnsPrefix"]
    assert any(Path("/etc/netns").glob(f"{prefix}-*_default_dns-client/resolv.conf"))


def test_answers_from_a_pod(lab: Cluster) -> None:
    echo = wait_for("two echo pods", lambda: ready_pods(lab, "app=echo", 2), timeout=60)
    cluster_ip = lab.kubectl("get", "svc", "echo", "-o", "jsonpath={.spec.clusterIP}").stdout
    some_ip = min(echo.values())
    dashed = some_ip.replace(".", "-")
    out = probe(lab, [
        ("a", "echo.default.svc.cluster.local.", "A"),
        ("aaaa", "echo.default.svc.cluster.local.", "AAAA"),
        ("srv", "_http._tcp.echo.default.svc.cluster.local.", "SRV"),
        ("headless", "echo-headless.default.svc.cluster.local.", "A"),
        ("headless_srv", "_http._tcp.echo-headless.default.svc.cluster.local.", "SRV"),
        ("endpoint", f"{dashed}.echo-headless.default.svc.cluster.local.", "A"),
        ("empty_headless", "nobody.default.svc.cluster.local.", "A"),
        ("missing", "missing.default.svc.cluster.local.", "A"),
        ("pod", f"{dashed}.default.pod.cluster.local.", "A"),
        ("outside", "example.com.", "A"),
    ])
    assert out["nameservers"] == ["10.96.0.10"]
    assert out["search"] == ["default.svc.cluster.local.", "svc.cluster.local.", "cluster.local."]
    assert out["a"]["rcode"] == "NOERROR" and out["a"]["aa"] and out["a"]["answer"] == [cluster_ip]
    assert out["tcp"]["answer"] == [cluster_ip]
    # NODATA: the name exists, the type does not; NXDOMAIN: no such name. Both carry the SOA.
    assert (out["aaaa"]["rcode"], out["aaaa"]["answer"]) == ("NOERROR", [])
    for key in ("aaaa", "missing", "empty_headless"):
        assert out[key]["authority"] and " IN SOA ns.dns.cluster.local. hostmaster.cluster.local. " in \
            out[key]["authority"][0], out[key]
    assert out["missing"]["rcode"] == "NXDOMAIN"
    assert out["empty_headless"]["rcode"] == "NXDOMAIN"  # a headless Service with no ready endpoint
    assert out["srv"]["answer"] == ["0 100 5555 echo.default.svc.cluster.local."]
    assert f"echo.default.svc.cluster.local. 30 IN A {cluster_ip}" in out["srv"]["additional"]
    assert out["headless"]["answer"] == sorted(echo.values())
    targets = sorted(f"0 50 8080 {ip.replace('.', '-')}.echo-headless.default.svc.cluster.local."
                     for ip in echo.values())
    assert out["headless_srv"]["answer"] == targets
    assert out["endpoint"]["answer"] == [some_ip]
    assert out["pod"]["answer"] == [some_ip]
    assert out["outside"]["rcode"] == "REFUSED"  # nothing leaves the lab
    assert out["search_a"] == [cluster_ip]
    assert out["search_other_ns"] == ["10.96.0.10"]


def test_curl_a_service_by_its_short_name(lab: Cluster) -> None:
    echo = wait_for("two echo pods", lambda: ready_pods(lab, "app=echo", 2), timeout=60)
    seen: set[str] = set()

    def both_reached() -> bool:
        seen.add(lab.curl(POD, "http://echo:5555/"))
        return set(echo) <= seen

    wait_for("curl http://echo:5555 to reach both pods", both_reached, timeout=60, interval=0)
    assert seen - {""} == set(echo)
    assert lab.curl(POD, "http://echo.default:5555/") in echo
    assert lab.curl(POD, "http://echo.default.svc.cluster.local:5555/") in echo


def test_dns_follows_endpoint_changes(lab: Cluster) -> None:
    lab.kubectl("scale", "deployment", "echo", "--replicas=3")
    echo = wait_for("three echo pods", lambda: ready_pods(lab, "app=echo", 3), timeout=90)

    def headless_lists_three() -> bool:
        out = probe(lab, [("headless", "echo-headless.default.svc.cluster.local.", "A")])
        return out["headless"]["answer"] == sorted(echo.values())

    wait_for("the headless Service to list the third pod", headless_lists_three, timeout=60)


def test_metrics_through_the_kube_dns_service(lab: Cluster) -> None:
    result = lab.exec(POD, "curl", "-s", "--max-time", "3", "http://kube-dns.kube-system:9153/metrics")
    counters = [line for line in result.stdout.splitlines() if line.startswith("coredns_dns_requests_total{")]
    assert any('proto="udp"' in line and 'type="A"' in line for line in counters), result.stdout
