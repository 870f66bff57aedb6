"""hostNetwork pods on the netns lab (`kubelab up`), as kubelet runs them: no network namespace or veth of
their own, the node's InternalIP as podIP and hostIP, their ports answering on the node's address from
anywhere on the lab network, and a command that sees the node's interfaces and the node's name as its
hostname."""

from __future__ import annotations

import json
from typing import Any

from kubelab_cluster import Cluster, wait_for
from pyroute2 import netns as pyroute2_netns

from kubeletstub.netnames import pod_netns_name


def apply_pod(cluster: Cluster, name: str, container: dict[str, Any]) -> None:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": "busybox", **container}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def running(cluster: Cluster, name: str) -> dict[str, Any] | None:
    pod: dict[str, Any] = cluster.kubectl_json("get", "pod", name)
    return pod if pod["status"].get("phase") == "Running" else None


def node_ip(cluster: Cluster, node: str) -> str:
    addresses = cluster.kubectl_json("get", "node", node)["status"]["addresses"]
    return str(next(a["address"] for a in addresses if a["type"] == "InternalIP"))


def test_a_host_network_pod_answers_on_its_nodes_address(cluster: Cluster) -> None:
    apply_pod(cluster, "hostweb", {"ports": [{"containerPort": 18080}]})
    pod = wait_for("hostweb Running", lambda: running(cluster, "hostweb"))
    node = pod["spec"]["nodeName"]
    ip = node_ip(cluster, node)
    status = pod["status"]
    assert status["podIP"] == status["hostIP"] == ip
    assert status["podIPs"] == [{"ip": ip}]
    other = next(n for n in ("node-1", "node-2", "node-3") if n != node)
    body = wait_for("hostweb through the node's address", lambda: cluster.curl(other, f"http://{ip}:18080/"))
    assert "hostweb" in body
    # No namespace of its own: the node's eth0 answers, and the lab holds no pod namespace for it.
    netns = cluster.exec(node, "ip", "-o", "-4", "addr", "show", "dev", "eth0").stdout
    assert f" {ip}/" in netns
    assert pod_netns_name(cluster.state["netnsPrefix"], node, "default/hostweb") not in pyroute2_netns.listnetns()
    cluster.kubectl("delete", "pod", "hostweb", "--wait=true")
    wait_for("hostweb's port closed", lambda: cluster.curl(other, f"http://{ip}:18080/") == "")


def test_a_host_network_command_sees_the_nodes_network_and_name(cluster: Cluster) -> None:
    script = "ip -o -4 addr show dev eth0; hostname; exec sleep 3600"
    apply_pod(cluster, "hostcmd", {"command": ["sh", "-c", script]})
    pod = wait_for("hostcmd Running", lambda: running(cluster, "hostcmd"))
    node = pod["spec"]["nodeName"]
    ip = node_ip(cluster, node)
    assert pod["status"]["podIP"] == ip
    def output() -> str | None:
        out = cluster.kubectl("logs", "hostcmd").stdout
        return out if out.count("\n") >= 2 else None

    logs = wait_for("hostcmd's output", output)
    assert f" {ip}/" in logs and logs.splitlines()[-1] == node
    assert cluster.kubectl("exec", "hostcmd", "--", "hostname").stdout.strip() == node
    cluster.kubectl("delete", "pod", "hostcmd", "--wait=true")
