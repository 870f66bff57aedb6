"""`kubelab up --apiservers 3 --etcd-members 3` with the netns dataplane (root): three API servers on a
three-member etcd cluster under the real network lab, used as a user would.

Through the second and third API servers (child processes on the ports after --listen) the real kubectl
creates a Service and three pods; the pods get addresses in their nodes' pod CIDRs and run, the Endpoints
name them, each node's own iptables holds kube-proxy's chains for them, and curl to the ClusterIP from a
node's namespace reaches every pod. A write through one API server is read through the others, and a
watch through the third sees it. The kubernetes Service's endpoints are the first server's lab address
only: pods reach the API on the lab network, where only the first one listens (launcher/apiservers.py),
so the others must not add their loopback addresses to it, which would send pods' API traffic nowhere.
A pod reads the API through 10.96.0.1. Then one child API server is SIGKILLed: the cluster goes on
(a pod created through the survivor runs), `kubelab up` starts the killed one again at the same URL, and
Ctrl-C still stops everything and leaves nothing behind: no namespace, no etcd member, no API server
process.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubelab_cluster import Cluster, wait_for
from procfs import alive

from kubelab.etcd import free_port

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

NS = f"ha-{secrets.token_hex(3)}"
PODS = ("web-1", "web-2", "web-3")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    lab = Cluster(tmp_path_factory.mktemp("ha") / "data", extra_args=["--apiservers", "3", "--etcd-members", "3"])
    while not all(_port_free(p) for p in (lab.port + 1, lab.port + 2)):  # --apiservers takes the next ports
        lab.port = free_port()
        lab.server = f"http://127.0.0.1:{lab.port}"
    lab.start(timeout=300)
    try:
        yield lab
    finally:
        code, left = lab.shutdown()
        extras = _apiserver_children(lab)
        assert code == 0, f"kubelab up did not exit cleanly on Ctrl-C (exit {code}):\n{lab.log()[-4000:]}"
        assert not left, f"left behind after Ctrl-C: {left}"
        assert not extras, f"API server processes left: {extras}"


def _apiserver_children(lab: Cluster) -> list[int]:
    """`kubelab apiserver` processes listening on the lab's extra ports, alive."""
    found = []
    for port in (lab.port + 1, lab.port + 2):
        ps = subprocess.run(["pgrep", "-f", f"kubelab apiserver .*--listen 127.0.0.1:{port}"], check=False,
                            capture_output=True, text=True).stdout
        found += [int(pid) for pid in ps.split() if alive(int(pid))]
    return found


def kubectl(lab: Cluster, server: str, *args: str, input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["kubectl", "--kubeconfig", str(lab.kubeconfig), "--cache-dir", str(lab.cache_dir), "--server", server,
            *args]
    done = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=60, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done


def kubectl_json(lab: Cluster, server: str, *args: str) -> Any:
    return json.loads(kubectl(lab, server, *args, "-o", "json").stdout)


def web_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "api", "image": "example/api:1.0", "ports": [{"containerPort": 5000}]}]}}


def running_pods(lab: Cluster, server: str, names: tuple[str, ...]) -> dict[str, dict[str, str]] | None:
    items = kubectl_json(lab, server, "get", "pods", "-n", NS, "-l", "app=web")["items"]
    found = {p["metadata"]["name"]: {"node": p["spec"].get("nodeName", ""), "ip": p["status"].get("podIP", "")}
             for p in items if p["status"].get("phase") == "Running"}
    return found if set(names) <= set(found) else None


def test_three_apiservers_serve_the_netns_lab(ha: Cluster) -> None:
    servers = ha.state["servers"]
    assert servers == [f"http://127.0.0.1:{ha.port + i}" for i in range(3)]
    assert len(ha.state["etcd"]) == 3
    first, second, third = servers
    status = ha.kubelab("status", "--data-dir", str(ha.data_dir)).stdout
    assert all(url in status for url in servers), status

    # A write through one is read through the others; a watch through the third sees it.
    kubectl(ha, second, "create", "namespace", NS)
    watch = subprocess.Popen(["kubectl", "--kubeconfig", str(ha.kubeconfig), "--cache-dir", str(ha.cache_dir),
                              "--server", third, "get", "configmaps", "-n", NS, "--watch", "-o", "name",
                              "--field-selector", "metadata.name=written-on-2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the namespace through the first", lambda: kubectl(ha, first, "get", "namespace", NS,
                                                                    check=False).returncode == 0)
        kubectl(ha, second, "create", "configmap", "written-on-2", "-n", NS, "--from-literal=k=v")
        assert watch.stdout is not None
        assert watch.stdout.readline().strip() == "configmap/written-on-2"
    finally:
        watch.kill()
        watch.wait()
    assert kubectl_json(ha, third, "get", "configmap", "written-on-2", "-n", NS)["data"] == {"k": "v"}

    # The pods and their Service, created through the second and the third: real pod networking.
    wait_for("the default ServiceAccount", lambda: kubectl(ha, third, "get", "sa", "default", "-n", NS,
                                                          check=False).returncode == 0, timeout=60)
    kubectl(ha, second, "apply", "-f", "-", input=yaml.safe_dump_all([web_pod(p) for p in PODS]))
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 5555, "targetPort": 5000}]}}
    kubectl(ha, third, "apply", "-f", "-", input=json.dumps(service))
    pods = wait_for("three pods Running", lambda: running_pods(ha, third, PODS), timeout=180)
    for name, pod in pods.items():
        index = int(re.fullmatch(r"node-(\d+)", pod["node"]).group(1))  # type: ignore[union-attr]
        assert pod["ip"].startswith(f"10.244.{index}."), (name, pod)
    pod_ips = sorted(p["ip"] for p in pods.values())

    def endpoints() -> list[str] | None:
        ep = kubectl_json(ha, first, "get", "endpoints", "web", "-n", NS)
        ips = sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])
        return ips if ips == pod_ips else None

    wait_for("the Service's endpoints", endpoints, timeout=180)
    cluster_ip = kubectl(ha, first, "get", "svc", "web", "-n", NS, "-o", "jsonpath={.spec.clusterIP}").stdout
    def programmed() -> bool:
        nat = ha.iptables_save("node-1")
        return all(f"{NS}/web -> {ip}:5000" in nat for ip in pod_ips)

    wait_for("kube-proxy's rules for three endpoints in node-1", programmed, timeout=180)
    seen: set[str] = set()

    def all_reached() -> bool:
        seen.add(ha.curl("node-1", f"http://{cluster_ip}:5555/"))
        return set(PODS) <= seen

    wait_for(f"curl {cluster_ip}:5555 from node-1 reaching {PODS}", all_reached, timeout=180, interval=0)
    assert seen - {""} == set(PODS)

    # Pods reach the API at the first server's lab address only: the others stay out of the Service.
    ep = kubectl_json(ha, second, "get", "endpoints", "kubernetes", "-n", "default")
    assert ep["subsets"] == [{"addresses": [{"ip": "10.240.0.4"}],
                              "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]
    slices = kubectl_json(ha, third, "get", "endpointslices", "-n", "default", "-l",
                          "kubernetes.io/service-name=kubernetes")["items"]
    assert [[a for e in s["endpoints"] for a in e["addresses"]] for s in slices] == [["10.240.0.4"]]
    # ... and a pod does read the API through 10.96.0.1 (its own namespace, the lab CA).
    ca = Path(ha.state["podCA"])
    version = ha.exec(f"{NS}/web-1", "curl", "-sS", "--max-time", "30", "--cacert", str(ca),
                      "https://10.96.0.1/version", check=False)
    assert version.returncode == 0 and json.loads(version.stdout)["major"] == "1", version.stderr


def test_a_child_apiserver_killed_the_cluster_goes_on(ha: Cluster) -> None:
    first, second, third = ha.state["servers"]
    (victim,) = [pid for pid in _apiserver_children(ha) if f"127.0.0.1:{ha.port + 1}" in
                 Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()]
    os.kill(victim, signal.SIGKILL)
    wait_for("the killed API server gone", lambda: not alive(victim))
    kubectl(ha, third, "apply", "-f", "-", input=yaml.safe_dump(web_pod("web-4")))
    pods = wait_for("web-4 Running", lambda: running_pods(ha, first, ("web-4",)), timeout=180)
    assert pods["web-4"]["ip"].startswith("10.244.")

    # `kubelab up` starts it again (launcher/apiservers.py), on the socket it kept: the same URL.
    def restarted() -> dict[str, Any] | None:
        record = json.loads((ha.data_dir / "cluster.json").read_text())["apiservers"][1]
        return record if record["pid"] != victim and record["state"] == "running" else None
    again = wait_for("the killed API server started again", restarted, timeout=240)
    assert (again["url"], again["restarts"]) == (second, 1)
    assert kubectl(ha, second, "get", "--raw", "/readyz").stdout == "ok"
