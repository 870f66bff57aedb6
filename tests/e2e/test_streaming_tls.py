"""With `kubelab up --dataplane netns --token-auth-file` the kubelet API is HTTPS with the lab CA's
certificate and wants the API server's client certificate (kube-apiserver's --kubelet-client-certificate);
exec and port-forward work through it as without TLS, and nothing else on the lab network may use it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelab_cluster import Cluster, wait_for

from kubelab import addressing

_TOKENS_DIR = Path(tempfile.mkdtemp(prefix="kubelab-stream-tokens-"))
KUBELAB_UP_ARGS = ("--token-auth-file", str(_TOKENS_DIR / "tokens.csv"))
KUBECTL = {"1.29": "/usr/lib/google-cloud-sdk/bin/kubectl.1.29", "1.33": "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"}
POD = """
apiVersion: v1
kind: Pod
metadata: {name: secure}
spec: {containers: [{name: web, image: nginx, ports: [{containerPort: 8080}]}]}
"""


@pytest.fixture(scope="module", autouse=True)
def _remove_tokens_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_TOKENS_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def running(cluster: Cluster) -> Cluster:
    # Retried: a pod may be refused until its namespace's default ServiceAccount exists.
    wait_for("the pod created", lambda: cluster.kubectl("apply", "-f", "-", input=POD, check=False).returncode == 0)
    wait_for("the pod Running", lambda: cluster.kubectl_json("get", "pod", "secure")["status"].get("phase") == "Running")
    return cluster


@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_exec_through_the_tls_kubelet(running: Cluster, version: str) -> None:
    argv = [KUBECTL[version], "--kubeconfig", str(running.kubeconfig), "exec", "secure", "--", "sh", "-c",
            "echo secure; exit 5"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (5, "secure\n", "command terminated with exit code 5\n")


def test_the_kubelet_api_wants_the_api_servers_certificate(running: Cluster) -> None:
    node = running.kubectl_json("get", "pod", "secure")["spec"]["nodeName"]
    ip = running.state["nodes"][node]["ip"]
    assert ip == addressing.node_ip(int(node.rsplit("-", 1)[1]))
    # From the outside client on the lab network: TLS, and no way in without the client certificate.
    plain = running.exec("client", "curl", "-s", "--max-time", "5", f"http://{ip}:10250/pods", check=False)
    assert "PodList" not in plain.stdout
    anonymous = running.exec("client", "curl", "-s", "--max-time", "5", "--cacert", running.state["ca"],
                             f"https://{ip}:10250/pods", check=False)
    assert anonymous.returncode != 0  # the handshake itself fails: a client certificate is required
    assert "PodList" not in anonymous.stdout
