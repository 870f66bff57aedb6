"""services/proxy and pods/proxy in `kubelab up --dataplane netns`: the API server reaches a real pod (the
built-in server, in the pod's own network namespace on its node) from its own namespace on the lab network,
10.240.0.4, by a real route to the node's pod CIDR, as kube-apiserver reaches pod IPs. Driven by the real
kubectl: `get --raw`, and `kubectl proxy` then an HTTP client.
"""

from __future__ import annotations

import secrets
import subprocess

import httpx
import pytest
import yaml
from kubelab_cluster import Cluster, wait_for

NS = f"pxy-{secrets.token_hex(3)}"


def web_pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "busybox:1.36", "ports": [{"containerPort": 8080}]}]}}


def service(name: str, app: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": app}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


@pytest.fixture(scope="module")
def lab(cluster: Cluster) -> Cluster:
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        [web_pod("web-a"), web_pod("web-b"), service("web", "web"), service("nobody", "none")]))

    def ready_addresses() -> list[str] | None:
        ep = cluster.kubectl_json("get", "endpoints", "web", "-n", NS)
        ips = [a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []]
        return ips if len(ips) == 2 else None

    wait_for("both pods ready behind the Service", ready_addresses, timeout=120)
    return cluster


def test_kubectl_get_raw_reaches_a_ready_pod_of_the_service(lab: Cluster) -> None:
    seen = set()
    for _ in range(40):  # kube picks an address at random: both come up
        out = lab.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/services/web:80/proxy/").stdout.strip()
        seen.add(out)
        if seen == {"web-a", "web-b"}:
            break
    assert seen == {"web-a", "web-b"}
    assert lab.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/pods/web-b/proxy/x").stdout.strip() == "web-b"
    assert lab.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/services/http:web:http/proxy/").stdout.strip() \
        in {"web-a", "web-b"}


def test_the_pod_sees_the_api_server_on_the_lab_network(lab: Cluster) -> None:
    with lab.api() as api:
        resp = api.get(f"/api/v1/namespaces/{NS}/pods/web-a/proxy/")
    assert resp.status_code == 200, resp.text
    pod_ip = lab.kubectl_json("get", "pod", "web-a", "-n", NS)["status"]["podIP"]
    assert resp.headers["x-server-address"] == f"{pod_ip}:8080"
    assert resp.headers["x-client-address"].startswith("10.240.0.4:")  # the API server's own address, no SNAT


def test_kubectl_proxy_then_an_http_client(lab: Cluster) -> None:
    proc = subprocess.Popen(["kubectl", "--kubeconfig", str(lab.kubeconfig), "--cache-dir", str(lab.cache_dir), "proxy",
                             "--port=0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        local = "http://" + proc.stdout.readline().strip().rsplit(" ", 1)[1]
        with httpx.Client(base_url=local, timeout=30) as client:
            resp = client.get(f"/api/v1/namespaces/{NS}/services/web:http/proxy/")
            assert resp.status_code == 200 and resp.text.strip() in {"web-a", "web-b"}
    finally:
        proc.terminate()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_a_service_without_ready_pods_is_kubes_503(lab: Cluster) -> None:
    failed = lab.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/services/nobody:80/proxy/", check=False)
    assert failed.returncode != 0
    assert 'Error from server (ServiceUnavailable): no endpoints available for service "nobody"' in failed.stderr


def test_a_deleted_pod_is_no_longer_proxied_to(lab: Cluster) -> None:
    lab.kubectl("delete", "pod", "web-a", "-n", NS, "--wait=true", "--timeout=60s")
    wait_for("web-a out of the endpoints", lambda: all(
        a.get("targetRef", {}).get("name") != "web-a"
        for s in lab.kubectl_json("get", "endpoints", "web", "-n", NS).get("subsets") or []
        for a in s.get("addresses") or []) or None, timeout=60)
    for _ in range(10):
        assert lab.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/services/web:80/proxy/").stdout.strip() == "web-b"
