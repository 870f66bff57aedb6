"""Evictions and PodDisruptionBudgets on `kubelab up` (render dataplane) with the real kubectl: the
disruption controller keeps each budget's status, `pods/eviction` spends it (kube's 429 when it is
spent), and `kubectl drain` evicts through it, waiting on a budget as it does against kube."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import httpx
import pytest
from kubectltools import Kubectl, RenderCluster, manifest, table, wait_for

NS = f"evict-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderCluster]:
    running = RenderCluster(tmp_path_factory.mktemp("render-evict") / "data", nodes=2).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def kubectl(cluster: RenderCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    kubectl = Kubectl("dispatcher", cluster.kubeconfig, tmp_path_factory.mktemp("cache"))
    kubectl.ok("create", "namespace", NS)
    return kubectl


def _deploy(kubectl: Kubectl, name: str, replicas: int, pdb: dict[str, object]) -> None:
    kubectl.ok("apply", "-n", NS, "-f", "-", input=manifest(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}},
                               "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
         "spec": {"selector": {"matchLabels": {"app": name}}, **pdb}}))


def _pdb_row(kubectl: Kubectl, name: str) -> dict[str, str]:
    return next(r for r in table(kubectl.ok("get", "pdb", "-n", NS)) if r["NAME"] == name)


def _ready_pods(kubectl: Kubectl, app: str) -> list[str]:
    pods = json.loads(kubectl.ok("get", "pods", "-n", NS, "-l", f"app={app}", "-o", "json"))["items"]
    return [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])]


def test_a_spent_budget_answers_429_and_a_free_one_evicts(kubectl: Kubectl, cluster: RenderCluster) -> None:
    _deploy(kubectl, "tight", 2, {"minAvailable": 2})
    wait_for("two ready pods and the budget's status",
             lambda: len(_ready_pods(kubectl, "tight")) == 2 and _pdb_row(kubectl, "tight")["ALLOWED DISRUPTIONS"] == "0")
    row = _pdb_row(kubectl, "tight")
    assert (row["MIN AVAILABLE"], row["MAX UNAVAILABLE"]) == ("2", "N/A")
    victim = _ready_pods(kubectl, "tight")[0]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": NS}}
    refused = httpx.post(f"{cluster.server}/api/v1/namespaces/{NS}/pods/{victim}/eviction", json=eviction)
    assert refused.status_code == 429
    assert refused.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.", "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget",
                                "message": "The disruption budget tight needs 2 healthy pods and has 2 currently"}]},
        "code": 429}
    assert victim in _ready_pods(kubectl, "tight")  # refused: the pod is untouched

    kubectl.ok("patch", "pdb", "tight", "-n", NS, "--type", "merge", "-p", '{"spec":{"minAvailable":1}}')
    wait_for("one disruption allowed", lambda: _pdb_row(kubectl, "tight")["ALLOWED DISRUPTIONS"] == "1")
    # A finalizer keeps the evicted pod visible (deleting) so what the eviction wrote on it can be read.
    kubectl.ok("patch", "pod", victim, "-n", NS, "--type", "merge", "-p", '{"metadata":{"finalizers":["test/hold"]}}')
    done = httpx.post(f"{cluster.server}/api/v1/namespaces/{NS}/pods/{victim}/eviction", json=eviction)
    assert (done.status_code, done.json()["status"]) == (201, "Success"), done.text
    held = json.loads(kubectl.ok("get", "pod", victim, "-n", NS, "-o", "json"))
    assert held["metadata"]["deletionTimestamp"]
    target = next(c for c in held["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == ("True", "EvictionByEvictionAPI",
                                                                       "Eviction API: evicting")
    kubectl.ok("patch", "pod", victim, "-n", NS, "--type", "json", "-p",
               '[{"op":"remove","path":"/metadata/finalizers"}]')
    wait_for("the evicted pod gone", lambda: kubectl("get", "pod", victim, "-n", NS).returncode != 0)
    wait_for("its replacement ready and the budget whole again", lambda: len(_ready_pods(kubectl, "tight")) == 2
             and _pdb_row(kubectl, "tight")["ALLOWED DISRUPTIONS"] == "1")


def test_kubectl_drain_evicts_and_waits_on_a_budget(kubectl: Kubectl) -> None:
    _deploy(kubectl, "guarded", 1, {"maxUnavailable": 0})
    wait_for("the guarded pod ready", lambda: len(_ready_pods(kubectl, "guarded")) == 1)
    wait_for("the budget's status", lambda: _pdb_row(kubectl, "guarded")["ALLOWED DISRUPTIONS"] == "0")
    pod = json.loads(kubectl.ok("get", "pods", "-n", NS, "-l", "app=guarded", "-o", "json"))["items"][0]
    node = pod["spec"]["nodeName"]
    result = kubectl("drain", node, "--pod-selector", "app=guarded", "--timeout", "8s")
    assert result.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in result.stderr, result.stderr
    assert f'evicting pod {NS}/{pod["metadata"]["name"]}' in result.stdout + result.stderr
    assert pod["metadata"]["name"] in _ready_pods(kubectl, "guarded")
    kubectl.ok("delete", "pdb", "guarded", "-n", NS)
    drained = kubectl.ok("drain", node, "--pod-selector", "app=guarded", "--timeout", "60s")
    assert f'pod/{pod["metadata"]["name"]} evicted' in drained
    assert f"node/{node} drained" in drained
    nodes = {r["NAME"]: r["STATUS"] for r in table(kubectl.ok("get", "nodes"))}
    assert nodes[node] == "Ready,SchedulingDisabled"
    wait_for("a replacement pod on the other node", lambda: [
        p for p in json.loads(kubectl.ok("get", "pods", "-n", NS, "-l", "app=guarded", "-o", "json"))["items"]
        if p["spec"].get("nodeName") not in (None, node) and not p["metadata"].get("deletionTimestamp")])
    kubectl.ok("uncordon", node)


def test_eviction_of_a_pod_that_does_not_exist_is_kubes_404(cluster: RenderCluster) -> None:
    resp = httpx.post(f"{cluster.server}/api/v1/namespaces/{NS}/pods/nobody/eviction",
                      json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "nobody"}})
    assert (resp.status_code, resp.json()["message"]) == (404, 'pods "nobody" not found')
    mismatch = httpx.post(f"{cluster.server}/api/v1/namespaces/{NS}/pods/nobody/eviction",
                          json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}})
    assert (mismatch.status_code, mismatch.json()["message"]) == \
        (400, "name in URL does not match name in Eviction object")


def test_budgets_are_validated_in_kubes_words(kubectl: Kubectl) -> None:
    result = kubectl("apply", "-n", NS, "-f", "-", input=manifest(
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "bad"},
         "spec": {"minAvailable": "150%", "selector": {"matchLabels": {"app": "x"}}}}))
    assert result.returncode == 1
    # IntOrString's String() has a pointer receiver: field.Invalid prints the value with %#v, as here.
    assert 'The PodDisruptionBudget "bad" is invalid: spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, ' \
           'IntVal:0, StrVal:"150%"}: must not be greater than 100%' in result.stderr, result.stderr
