"""Readiness from probes, and graceful termination, as the kubelet and the endpoint controllers do them:
httpGet, tcpSocket and exec readiness probes decide whether a pod is Ready and so whether it is in the
Endpoints and in every node's rules; a pod being deleted with a preStop hook stays in its EndpointSlice
as serving and terminating (not ready), leaves the Endpoints, and — being its Service's only endpoint —
still answers through the ClusterIP (kube-proxy falls back to serving terminating endpoints) until it
is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for

MANIFEST = Path(__file__).parent / "manifests" / "lifecycle.yaml"


def ready(cluster: Cluster, pod: str) -> str | None:
    conditions = cluster.kubectl_json("get", "pod", pod)["status"].get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), None)


def slice_endpoints(cluster: Cluster, service: str) -> list[dict[str, Any]]:
    items = cluster.kubectl_json("get", "endpointslices", "-l", f"kubernetes.io/service-name={service}")["items"]
    return [ep for s in items for ep in s.get("endpoints") or []]


@pytest.fixture(scope="module")
def applied(cluster: Cluster) -> Cluster:
    cluster.kubectl("apply", "-f", str(MANIFEST))
    wait_for("all lifecycle pods Running", lambda: all(
        cluster.kubectl_json("get", "pod", p)["status"].get("phase") == "Running"
        for p in ("http-ready", "tcp-never", "exec-ready", "exec-never", "slow-stop")))
    return cluster


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param("http-ready", "True", id="httpGet probe passes"),
    pytest.param("exec-ready", "True", id="exec probe passes"),
    pytest.param("tcp-never", "False", id="tcpSocket probe on a closed port fails"),
    pytest.param("exec-never", "False", id="exec probe exits 1"),
])
def test_readiness_comes_from_the_probe(applied: Cluster, pod: str, want: str) -> None:
    wait_for(f"{pod} Ready={want}", lambda: ready(applied, pod) == want)
    if want == "False":
        status = applied.kubectl_json("get", "pod", pod)["status"]
        cond = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert cond["reason"] == "ContainersNotReady"
        assert cond["message"] == "containers with unready status: [web]"
        events = applied.kubectl("get", "events", "--field-selector", f"involvedObject.name={pod},reason=Unhealthy")
        assert "Readiness probe failed" in events.stdout


def test_only_ready_pods_are_in_the_endpoints_and_the_rules(applied: Cluster) -> None:
    ips = {p: applied.kubectl_json("get", "pod", p)["status"]["podIP"]
           for p in ("http-ready", "exec-ready", "tcp-never", "exec-never")}

    def endpoints_settled() -> dict[str, Any] | None:
        ep = applied.kubectl_json("get", "endpoints", "probed")
        subsets = ep.get("subsets") or []
        ready_ips = {a["ip"] for s in subsets for a in s.get("addresses") or []}
        return ep if ready_ips == {ips["http-ready"], ips["exec-ready"]} else None

    ep = wait_for("Endpoints with the two ready pods", endpoints_settled)
    not_ready = {a["ip"] for s in ep["subsets"] for a in s.get("notReadyAddresses") or []}
    assert not_ready == {ips["tcp-never"], ips["exec-never"]}
    conditions = {e["addresses"][0]: e["conditions"] for e in slice_endpoints(applied, "probed")}
    assert conditions[ips["tcp-never"]]["ready"] is False
    assert conditions[ips["http-ready"]]["ready"] is True
    for node in ("node-1", "node-2", "node-3"):
        def only_ready(node: str = node) -> str | None:
            rules = applied.iptables_save(node)
            ready = f'{ips["http-ready"]}:8080' in rules and f'{ips["exec-ready"]}:8080' in rules
            return rules if ready else None

        nat = wait_for(f"{node}'s rules to hold only the ready pods", only_ready)
        assert f'{ips["tcp-never"]}:8080' not in nat and f'{ips["exec-never"]}:8080' not in nat


def test_a_terminating_pod_is_serving_and_terminating_until_it_goes(applied: Cluster) -> None:
    ip = applied.kubectl_json("get", "pod", "slow-stop")["status"]["podIP"]
    cluster_ip = applied.kubectl("get", "svc", "draining", "-o", "jsonpath={.spec.clusterIP}").stdout
    wait_for("slow-stop reachable through its Service", lambda: applied.curl("node-1", f"http://{cluster_ip}/")
             == "slow-stop")
    applied.kubectl("delete", "pod", "slow-stop", "--wait=false")

    def terminating() -> dict[str, Any] | None:
        eps = slice_endpoints(applied, "draining")
        cond = eps[0]["conditions"] if eps else {}
        return cond if cond.get("terminating") else None

    cond = wait_for("the slice to mark slow-stop terminating", terminating)
    assert cond == {"ready": False, "serving": True, "terminating": True}
    assert ip not in applied.kubectl("get", "endpoints", "draining", "-o", "json").stdout  # Endpoints drop it
    pod = applied.kubectl_json("get", "pod", "slow-stop")
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    # The Service's only endpoint is terminating but serving: kube-proxy keeps sending traffic to it.
    assert applied.curl("node-1", f"http://{cluster_ip}/") == "slow-stop"
    wait_for("slow-stop gone after its preStop hook", lambda: applied.kubectl(
        "get", "pod", "slow-stop", check=False).returncode != 0, timeout=60)
    assert slice_endpoints(applied, "draining") == []
    events = applied.kubectl("get", "events", "--field-selector", "involvedObject.name=slow-stop,reason=Killing")
    assert "Stopping container web" in events.stdout
