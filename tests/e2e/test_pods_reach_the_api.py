"""Pods reach the API server as in Kubernetes, in `kubelab up --dataplane netns` (no token file).

The controllers give every namespace its `default` ServiceAccount and its `kube-root-ca.crt`; the
ServiceAccount admission plugin gives every pod its kube-api-access volume; `kubectl create token`
issues a token bound to a pod; and from inside a pod's network namespace, curl with that token and the
CA of kube-root-ca.crt reads the API through https://10.96.0.1 (kube-proxy's DNAT on the node to the API
server's own address on the lab network, 10.240.0.4:6443, whose certificate the lab CA signed for the
Service's names); so does the official Python client configured as load_incluster_config() does it.
Deleting the pod kills its token: the same request from another pod is then a 401.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import pytest
import yaml
from kubelab_cluster import Cluster, wait_for

NS = f"reach-{secrets.token_hex(3)}"


def pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}


def running(cluster: Cluster, name: str) -> bool:
    phase = cluster.kubectl("get", "pod", name, "-n", NS, "-o", "jsonpath={.status.phase}", check=False).stdout
    return phase == "Running"


@pytest.fixture(scope="module")
def lab(cluster: Cluster) -> Cluster:
    cluster.kubectl("create", "namespace", NS)
    return cluster


def test_every_namespace_gets_its_account_and_ca(lab: Cluster) -> None:
    account = wait_for("the default ServiceAccount", lambda: lab.kubectl(
        "get", "sa", "default", "-n", NS, "-o", "jsonpath={.metadata.uid}", check=False).stdout, timeout=30)
    ca = wait_for("kube-root-ca.crt", lambda: lab.kubectl(
        "get", "configmap", "kube-root-ca.crt", "-n", NS, "-o", "json", check=False).stdout, timeout=30)
    assert json.loads(ca)["data"]["ca.crt"] == Path(lab.state["podCA"]).read_text()
    assert "BEGIN CERTIFICATE" in json.loads(ca)["data"]["ca.crt"]
    lab.kubectl("delete", "sa", "default", "-n", NS)
    again = wait_for("the default ServiceAccount again", lambda: (lab.kubectl(
        "get", "sa", "default", "-n", NS, "-o", "jsonpath={.metadata.uid}", check=False).stdout or None), timeout=30)
    assert again != account
    assert "default" in lab.kubectl("get", "sa", "-n", NS).stdout


def test_kubernetes_service_points_at_the_lab_address(lab: Cluster) -> None:
    svc = lab.kubectl_json("get", "svc", "kubernetes", "-n", "default")
    assert svc["spec"]["clusterIP"] == "10.96.0.1"
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [("https", 443, 6443)]
    ep = lab.kubectl_json("get", "endpoints", "kubernetes", "-n", "default")
    assert ep["subsets"] == [{"addresses": [{"ip": "10.240.0.4"}],
                              "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]


def test_a_pod_reads_the_api_through_the_cluster_ip(lab: Cluster, tmp_path: Path) -> None:
    wait_for("the default ServiceAccount", lambda: lab.kubectl("get", "sa", "default", "-n", NS,
                                                               check=False).returncode == 0, timeout=30)
    lab.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([pod("reader"), pod("other")]))
    for name in ("reader", "other"):
        wait_for(f"pod {name} Running", lambda name=name: running(lab, name), timeout=90)
    spec = lab.kubectl_json("get", "pod", "reader", "-n", NS)["spec"]
    assert spec["serviceAccountName"] == "default"
    assert spec["volumes"][-1]["name"].startswith("kube-api-access-")
    token = lab.kubectl("create", "token", "default", "-n", NS, "--bound-object-kind", "Pod",
                        "--bound-object-name", "reader").stdout.strip()
    ca = tmp_path / "ca.crt"
    ca.write_text(json.loads(lab.kubectl("get", "configmap", "kube-root-ca.crt", "-n", NS, "-o", "json").stdout)
                  ["data"]["ca.crt"])

    def get(from_pod: str, path: str) -> tuple[int, str]:
        result = lab.exec(f"{NS}/{from_pod}", "curl", "-sS", "--max-time", "60", "--cacert", str(ca),
                          "-H", f"Authorization: Bearer {token}", "-w", "\n%{http_code}", f"https://10.96.0.1{path}",
                          check=False)
        assert result.returncode == 0, result.stderr
        body, _, code = result.stdout.rpartition("\n")
        return int(code), body

    code, body = get("reader", f"/api/v1/namespaces/{NS}/pods/reader")
    assert code == 200, body
    answer = json.loads(body)
    assert answer["metadata"]["name"] == "reader" and answer["metadata"]["namespace"] == NS
    # The name the certificate carries for the Service, through cluster DNS.
    result = lab.exec(f"{NS}/other", "curl", "-sS", "--max-time", "60", "--cacert", str(ca),
                      "-H", f"Authorization: Bearer {token}", "https://kubernetes.default.svc/version", check=False)
    assert result.returncode == 0 and json.loads(result.stdout)["major"] == "1", result.stderr

    # The official Python client, configured as load_incluster_config() configures it (the Service's
    # environment variables, the token and ca.crt files; here at paths of the test's own, the
    # projection into the container being kubelet's), lists the pods through the ClusterIP.
    token_file = tmp_path / "token"
    token_file.write_text(token)
    script = (
        "import sys\n"
        "from kubernetes import client\n"
        "from kubernetes.config.incluster_config import InClusterConfigLoader\n"
        "InClusterConfigLoader(token_filename=sys.argv[1], cert_filename=sys.argv[2], environ={\n"
        "    'KUBERNETES_SERVICE_HOST': '10.96.0.1', 'KUBERNETES_SERVICE_PORT': '443'}).load_and_set()\n"
        "print(' '.join(sorted(p.metadata.name for p in client.CoreV1Api().list_namespaced_pod(sys.argv[3]).items)))\n")
    listed = lab.exec(f"{NS}/other", sys.executable, "-c", script, str(token_file), str(ca), NS, check=False)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "other reader"

    lab.kubectl("delete", "pod", "reader", "-n", NS, "--wait=true", "--timeout=60s")
    code, body = get("other", f"/api/v1/namespaces/{NS}/pods")
    assert code == 401, body
    status = json.loads(body)
    assert (status["kind"], status["reason"], status["message"]) == ("Status", "Unauthorized", "Unauthorized")
