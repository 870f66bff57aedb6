"""exec, port-forward and the kubelet API in `kubelab up --dataplane netns`: the API server, in its own
namespace on the lab network (10.240.0.4), reaches each node's kubelet on InternalIP:10250 through the lab
bridge, and splices kubectl's upgraded connection onto it. The newest kubectl speaks WebSocket (v5 for
exec, SPDY tunneled in a WebSocket for port-forward), kubectl 1.29 SPDY/3.1; the Python client's stream()
speaks v4/v5 WebSocket. Commands run in the pod's network namespace (they see the pod's eth0 and IP)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for

from kubelab import addressing
from kubelab.etcd import free_port

KUBECTL = {"1.29": "/usr/lib/google-cloud-sdk/bin/kubectl.1.29", "1.33": "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"}

MANIFEST = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: node-2
  containers: [{name: web, image: nginx, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: stranded}
spec:
  nodeName: node-3
  containers: [{name: web, image: nginx, ports: [{containerPort: 8080}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 1
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec: {containers: [{name: web, image: nginx, ports: [{containerPort: 8080}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
"""


def kubectl(cluster: Cluster, version: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [KUBECTL[version], "--kubeconfig", str(cluster.kubeconfig), "--cache-dir",
            str(cluster.cache_dir / version), *args]
    return subprocess.run(argv, capture_output=True, text=True, input=input, timeout=60, check=False)


@pytest.fixture(scope="module")
def applied(cluster: Cluster) -> Cluster:
    cluster.kubectl("apply", "-f", "-", input=MANIFEST)
    wait_for("the pods Running", lambda: all(
        p["status"].get("phase") == "Running" for p in cluster.kubectl_json("get", "pods")["items"]) and
        len(cluster.kubectl_json("get", "pods")["items"]) == 3)
    return cluster


def test_the_kubelet_api_is_on_the_lab_network(applied: Cluster) -> None:
    node = applied.kubectl_json("get", "node", "node-2")
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": addressing.KUBELET_PORT}}
    assert applied.state["apiserver"]["netns"].endswith("-apiserver")
    # The route the API server takes: its namespace on the lab network to the node's address.
    answer = applied.exec("apiserver", "curl", "-s", "--max-time", "5", f"http://{addressing.node_ip(2)}:10250/healthz")
    assert answer.stdout == "ok"


@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_kubectl_exec_runs_in_the_pod(applied: Cluster, version: str) -> None:
    pod_ip = applied.kubectl_json("get", "pod", "web")["status"]["podIP"]
    shown = kubectl(applied, version, "exec", "web", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0")
    assert shown.returncode == 0, shown.stderr
    assert f"inet {pod_ip}/" in shown.stdout
    failed = kubectl(applied, version, "exec", "web", "--", "sh", "-c", "echo out; exit 3")
    assert (failed.returncode, failed.stdout, failed.stderr) == (3, "out\n", "command terminated with exit code 3\n")
    piped = kubectl(applied, version, "exec", "-i", "web", "--", "wc", "-c", input="x" * 100_000)
    assert piped.stdout.strip() == "100000"


def test_python_client_exec_and_port_forward(applied: Cluster) -> None:
    from kubernetes import client, config
    from kubernetes.stream import portforward, stream

    api = client.CoreV1Api(config.new_client_from_config(str(applied.kubeconfig)))
    assert stream(api.connect_get_namespaced_pod_exec, "web", "default", command=["echo", "hi"], stderr=True,
                  stdin=False, stdout=True, tty=False) == "hi\n"
    forward = portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="8080")
    sock = forward.socket(8080)
    sock.setblocking(True)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"\r\n\r\nweb\n")  # the built-in server answers with the pod's name
    assert forward.error(8080) is None


@pytest.fixture
def forwarded(applied: Cluster, request: pytest.FixtureRequest) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    version, target, remote, _ = request.param
    port = free_port()
    proc = subprocess.Popen([KUBECTL[version], "--kubeconfig", str(applied.kubeconfig), "port-forward", target,
                             f"{port}:{remote}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Forwarding from 127.0.0.1:"), line + (proc.stderr.read() if proc.stderr else "")
        yield port, proc
    finally:
        proc.kill()
        proc.wait()


def _get(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data.decode()


FORWARDS = [
    pytest.param(("1.33", "pod/web", 8080, "web"), id="1.33 pod (SPDY in WebSocket)"),
    pytest.param(("1.29", "pod/web", 8080, "web"), id="1.29 pod (SPDY)"),
    pytest.param(("1.33", "svc/echo", 80, "echo-"), id="1.33 service"),
    pytest.param(("1.33", "deploy/echo", 8080, "echo-"), id="1.33 deployment"),
]


@pytest.mark.parametrize("forwarded", FORWARDS, indirect=True)
def test_kubectl_port_forward(applied: Cluster, forwarded: tuple[int, subprocess.Popen[str]],
                              request: pytest.FixtureRequest) -> None:
    """kubectl resolves a Service or Deployment to one of its pods itself; each connection is a stream
    pair of its own, one after another on the same forward."""
    port, _ = forwarded
    expected = request.node.callspec.params["forwarded"][3]
    for _ in range(3):
        answer = _get(port)
        assert answer.startswith("HTTP/1.1 200"), answer
        assert answer.rsplit("\r\n\r\n", 1)[1].startswith(expected), answer


def test_exec_into_a_pod_on_a_dead_node_is_a_clear_error(applied: Cluster) -> None:
    applied.kubelab("pause", "--data-dir", str(applied.data_dir), "node-3")
    try:
        result = kubectl(applied, "1.33", "exec", "stranded", "--", "true")
        assert result.returncode == 1
        assert f"error dialing backend: dial tcp {addressing.node_ip(3)}:10250: connect: connection refused" \
            in result.stderr
    finally:
        applied.kubelab("resume", "--data-dir", str(applied.data_dir), "node-3")
    wait_for("node-3's kubelet API back", lambda: kubectl(applied, "1.33", "exec", "stranded", "--", "true")
             .returncode == 0)


def test_nodes_proxy_reaches_the_kubelet(applied: Cluster) -> None:
    raw = applied.kubectl("get", "--raw", "/api/v1/nodes/node-2/proxy/pods").stdout
    pods: dict[str, Any] = json.loads(raw)
    assert "web" in {p["metadata"]["name"] for p in pods["items"]}


def _top_cpu_millis(cluster: Cluster, pod: str) -> int | None:
    result = kubectl(cluster, "1.33", "top", "pod", pod, "--no-headers")
    if result.returncode != 0:
        return None
    cpu = result.stdout.split()[1]
    return int(cpu.removesuffix("m")) if cpu.endswith("m") else int(cpu) * 1000


def test_kubectl_top_shows_a_busy_pods_cpu(applied: Cluster) -> None:
    """metrics.k8s.io from the kubelets' stats/summary: the CPU of the pod's processes (here a busy loop
    started with exec, which outlives the exec as it would in a container) and their memory."""
    busy = kubectl(applied, "1.33", "exec", "web", "--", "sh", "-c",
                   "timeout 120 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo started")
    assert busy.stdout == "started\n", busy.stderr
    try:
        # A busy loop gets a good share of a core even on a loaded machine; the idle pod next to it does not.
        wait_for("the busy pod's CPU in kubectl top", lambda: (_top_cpu_millis(applied, "web") or 0) >= 100,
                 timeout=90)
        idle = _top_cpu_millis(applied, "stranded")
        assert idle is not None and idle < 100
        nodes = kubectl(applied, "1.33", "top", "nodes", "--no-headers")
        assert nodes.returncode == 0 and "node-2" in nodes.stdout, nodes.stderr
        missing = kubectl(applied, "1.33", "top", "pod", "nope")
        assert missing.stderr == 'Error from server (NotFound): podmetrics.metrics.k8s.io "default/nope" not found\n'
    finally:
        kubectl(applied, "1.33", "exec", "web", "--", "pkill", "-f", "while :; do :; done")
