"""`kubelab up` (render dataplane, 3 nodes): every component's /metrics on the loopback port recorded in
cluster.json with kube's metric names, and `kubelab trace` of a Service and of a pod: accepted, delivered
to the controllers and every node's proxy, the endpoints written, every node's restore done, in that
order. Nothing here asserts a duration: only that each step is there, in order, from the right component.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from test_up_auth import NS, Up, wait_for

NODES = ("node-1", "node-2", "node-3")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    data_dir = tmp_path_factory.mktemp("trace") / "data"
    data_dir.mkdir()
    up = Up(data_dir, "--nodes", "3")
    try:
        up.wait_ready()
        yield up
    finally:
        up.stop()


def state(up: Up) -> dict[str, Any]:
    return json.loads((up.data_dir / "cluster.json").read_text())


def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubelab", *args], capture_output=True, text=True, timeout=60,
                          check=False)


def trace(up: Up, what: str) -> dict[str, Any]:
    done = kubelab("trace", what, "--data-dir", str(up.data_dir), "-o", "json")
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def nodes_applied(result: dict[str, Any]) -> set[str]:
    return {s["component"].removeprefix("proxy ") for s in result.get("steps", []) if s["step"] == "rules applied"}


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}}


def pod(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "pause", "ports": [{"containerPort": 8080}]}]}}


def cluster_nodes(up: Up) -> list[str]:
    return sorted(state(up)["nodes"])


def test_trace_of_a_service_follows_it_to_every_node(cluster: Up) -> None:
    nodes = set(cluster_nodes(cluster))
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        assert http.post(f"{NS}/services", json=service("traced")).status_code == 201
        for name in ("traced-1", "traced-2"):
            assert http.post(f"{NS}/pods", json=pod(name, "traced")).status_code == 201
        # Ready endpoints: the slice has both addresses.
        wait_for("both endpoints", lambda: len([e for s in http.get(
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            params={"labelSelector": "kubernetes.io/service-name=traced"}).json()["items"]
            for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")]) == 2)
        slices = http.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                          params={"labelSelector": "kubernetes.io/service-name=traced"}).json()["items"]
        assert any("endpoints.kubernetes.io/last-change-trigger-time" in (s["metadata"].get("annotations") or {})
                   for s in slices)

    result = wait_for("every node's restore in the trace",
                      lambda: (r := trace(cluster, "service/traced")) and nodes_applied(r) == nodes and r)
    steps = result["steps"]
    assert steps[0]["step"] == "accepted" and steps[0]["component"] == "apiserver"
    assert "create" in steps[0]["detail"]
    times = [s["sinceAccepted"] for s in steps]
    assert times == sorted(times)
    delivered = {s["component"] for s in steps if s["step"] == "delivered" and "watch event" in s["detail"]}
    assert "kubelab-controllers" in delivered
    # `kubelab up`'s proxy agents share one watch per kind (proxyagent/sharedinformers.py): the change is
    # delivered once, to kubelab-proxy, and every node applies it from there.
    assert "kubelab-proxy" in delivered
    written = [s for s in steps if s["step"] == "endpoints written"]
    assert any("endpointslice-controller" in s["detail"] for s in written)
    assert any("endpoints-controller" in s["detail"] for s in written)
    # No order between the endpoints writes and the nodes' restores: kube-proxy syncs a new Service at once,
    # with or without endpoints (a REJECT until it has some), so a node may apply it before the controllers
    # have written its endpoints, and with the API server in a process of its own it often does.
    # The Service's creation reached every proxy before that proxy applied it (the restore that wrote its
    # chains; the slice written before pods were ready moved no endpoint, the pods' own writes are theirs).
    for node in nodes:
        got = next(i for i, s in enumerate(steps) if s["component"] == "kubelab-proxy"
                   and "watch event" in s["detail"])
        done = next(i for i, s in enumerate(steps) if s["component"] == f"proxy {node}")
        assert got < done, (node, steps)
        assert steps[done]["took"] is not None
    table = kubelab("trace", "svc/traced", "--data-dir", str(cluster.data_dir))
    assert table.returncode == 0, table.stderr
    assert "rules applied" in table.stdout and "proxy node-1" in table.stdout


def test_trace_of_a_pod_reaches_the_endpoints_of_its_service(cluster: Up) -> None:
    nodes = set(cluster_nodes(cluster))
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        assert http.post(f"{NS}/services", json=service("podtrace")).status_code == 201
        wait_for("the Service's slice", lambda: http.get(
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            params={"labelSelector": "kubernetes.io/service-name=podtrace"}).json()["items"])
        assert http.post(f"{NS}/pods", json=pod("podtrace-1", "podtrace")).status_code == 201

    def ready_and_applied() -> dict[str, Any] | None:
        result = trace(cluster, "pod/podtrace-1")
        return result if nodes_applied(result) == nodes else None

    result = wait_for("the pod's change applied on every node", ready_and_applied)
    steps = result["steps"]
    assert result["services"] == ["default/podtrace"]
    assert steps[0]["step"] == "accepted"
    kinds_in_order = [s["step"] for s in steps]
    assert kinds_in_order.index("endpoints written") < kinds_in_order.index("rules applied")
    times = [s["sinceAccepted"] for s in steps]
    assert times == sorted(times)


def test_trace_of_an_unknown_object_says_so(cluster: Up) -> None:
    done = kubelab("trace", "service/never-made", "--data-dir", str(cluster.data_dir))
    assert done.returncode == 1
    assert "no write of this object is recorded" in done.stdout
    bad = kubelab("trace", "nonsense", "--data-dir", str(cluster.data_dir))
    assert bad.returncode == 2


def test_every_component_serves_its_metrics_where_cluster_json_says(cluster: Up) -> None:
    # Runs after the traces above: by now pods were scheduled and watch events sent.
    metrics = state(cluster)["metrics"]
    assert set(metrics["proxy"]) == set(cluster_nodes(cluster))
    expected = {
        "apiserver": ["apiserver_request_duration_seconds_bucket{", "apiserver_request_total{",
                      "etcd_request_duration_seconds_bucket{", "apiserver_watch_events_total{"],
        "scheduler": ['scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"}', "scheduler_scheduling_attempt_duration_seconds"],
        "controllers": ['workqueue_adds_total{name="endpointslice-controller"}', "workqueue_depth{",
                        "workqueue_queue_duration_seconds_bucket{", "workqueue_work_duration_seconds_bucket{"],
        "dns": ["coredns_dns_requests_total"],
    }
    for component, names in expected.items():
        text = httpx.get(metrics[component], timeout=10).text
        for name in names:
            assert name in text, f"{component} ({metrics[component]}) lacks {name}"
    ports = {url.rsplit(":", 1)[1] for url in metrics["proxy"].values()}
    assert len(ports) == len(metrics["proxy"]), "each proxy agent needs a listener of its own"
    for node, url in metrics["proxy"].items():
        text = httpx.get(url, timeout=10).text
        assert "kubeproxy_sync_proxy_rules_duration_seconds_bucket" in text, node
        assert "kubeproxy_network_programming_duration_seconds_bucket" in text, node
    status = kubelab("status", "--data-dir", str(cluster.data_dir))
    assert metrics["scheduler"] in status.stdout and metrics["proxy"]["node-1"] in status.stdout


def test_a_service_keeps_one_endpointslice_from_placeholder_to_ready_pods(cluster: Up) -> None:
    """The slice written while no pod is ready (the empty placeholder) becomes the real one when pods come:
    kube's reconciler pairs the create with the delete and updates in place, so the Service only ever has
    one slice name and the proxies see one slice change, not a second slice and a deletion."""
    name = "one-slice"
    names: set[str] = set()
    with httpx.Client(base_url=cluster.url, timeout=10) as http:
        path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
        selector = {"labelSelector": f"kubernetes.io/service-name={name}"}
        assert http.post(f"{NS}/services", json=service(name)).status_code == 201

        def placeholder() -> bool:
            items = http.get(path, params=selector).json()["items"]
            names.update(i["metadata"]["name"] for i in items)
            return len(items) == 1 and not items[0].get("endpoints")

        wait_for("the placeholder slice", placeholder)
        for i in range(3):
            assert http.post(f"{NS}/pods", json=pod(f"{name}-{i}", name)).status_code == 201

        def filled() -> bool:
            items = http.get(path, params=selector).json()["items"]
            names.update(i["metadata"]["name"] for i in items)
            return len(items) == 1 and len(items[0].get("endpoints") or []) == 3

        wait_for("three endpoints in the slice", filled)
    assert len(names) == 1, f"the Service had several slices: {sorted(names)}"
