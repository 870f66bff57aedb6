"""DaemonSets and StatefulSets for real, on one `kubelab up --dataplane netns` cluster (3 nodes), driven
by the real kubectl: a DaemonSet lands on every node, follows a node that becomes eligible, and rolls out,
back and forth (`kubectl rollout status/history/undo ds/...`); a StatefulSet's pods resolve each other by
their stable names through the headless Service and cluster DNS, from inside their own network
namespaces, and a pod added by `kubectl scale` gets its name too."""

from __future__ import annotations

import sys
from typing import Any

import yaml
from kubelab_cluster import Cluster, wait_for

NODES = ["node-1", "node-2", "node-3"]
LABEL = "kubelab.test/agent"

DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
             "spec": {"selector": {"matchLabels": {"app": "agent"}},
                      "template": {"metadata": {"labels": {"app": "agent"}},
                                   "spec": {"containers": [{"name": "agent", "image": "busybox:1.36"}]}}}}
PICKY = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "picky"},
         "spec": {"selector": {"matchLabels": {"app": "picky"}},
                  "template": {"metadata": {"labels": {"app": "picky"}},
                               "spec": {"nodeSelector": {LABEL: "yes"},
                                        "containers": [{"name": "agent", "image": "busybox:1.36"}]}}}}
WEB = [
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
     "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}},
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
     "spec": {"serviceName": "web", "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                    "ports": [{"name": "http", "containerPort": 80}]}]}}}},
]
RESOLVE = "import socket, sys; print(socket.gethostbyname(sys.argv[1]))"


def nodes_running(cluster: Cluster, app: str) -> list[str]:
    pods = cluster.kubectl_json("get", "pods", "-l", f"app={app}")["items"]
    return sorted(p["spec"].get("nodeName", "") for p in pods
                  if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


def test_daemonset_on_every_node_follows_nodes_and_rolls_back(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([DAEMONSET, PICKY]))
    out = cluster.kubectl("rollout", "status", "ds/agent", "--timeout=120s").stdout
    assert 'daemon set "agent" successfully rolled out' in out
    assert nodes_running(cluster, "agent") == NODES
    row = cluster.kubectl("get", "ds", "agent", "--no-headers").stdout.split()
    assert row[:6] == ["agent", "3", "3", "3", "3", "3"]

    # No node carries the label: no pod; label one and a pod follows it.
    assert nodes_running(cluster, "picky") == []
    cluster.kubectl("label", "node", "node-2", f"{LABEL}=yes")
    wait_for("a pod on node-2", lambda: nodes_running(cluster, "picky") == ["node-2"], timeout=60)
    cluster.kubectl("label", "node", "node-2", f"{LABEL}-")
    wait_for("the pod off node-2", lambda: nodes_running(cluster, "picky") == [], timeout=60)

    cluster.kubectl("set", "image", "ds/agent", "agent=busybox:1.37")
    cluster.kubectl("rollout", "status", "ds/agent", "--timeout=120s")
    history = cluster.kubectl("rollout", "history", "ds/agent").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    cluster.kubectl("rollout", "undo", "ds/agent")
    cluster.kubectl("rollout", "status", "ds/agent", "--timeout=120s")

    def images() -> set[str] | None:
        pods = cluster.kubectl_json("get", "pods", "-l", "app=agent")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        found = {c["image"] for p in live for c in p["spec"]["containers"]}
        return found if len(live) == 3 else None

    assert wait_for("the old image back", lambda: images() == {"busybox:1.36"}, timeout=60)
    cluster.kubectl("delete", "ds", "agent", "picky")


def test_statefulset_pods_resolve_each_other_by_name(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(WEB))
    out = cluster.kubectl("rollout", "status", "sts/web", "--timeout=120s").stdout
    # The defaulted partition (0) makes kubectl report a partitioned rollout, as against kube-apiserver.
    assert out.endswith("partitioned roll out complete: 2 new pods have been updated...\n")
    pods: dict[str, Any] = {p["metadata"]["name"]: p
                            for p in cluster.kubectl_json("get", "pods", "-l", "app=web")["items"]}
    assert sorted(pods) == ["web-0", "web-1"]

    def resolves(source: str, name: str) -> str:
        result = cluster.exec(source, sys.executable, "-c", RESOLVE, name, check=False)
        return result.stdout.strip() if result.returncode == 0 else ""

    ip_1 = pods["web-1"]["status"]["podIP"]
    assert wait_for("web-1 by name from web-0", lambda: resolves("web-0", "web-1.web") == ip_1, timeout=120)
    assert resolves("web-0", "web-1.web.default.svc.cluster.local") == ip_1
    assert resolves("web-1", "web-0.web") == pods["web-0"]["status"]["podIP"]

    cluster.kubectl("scale", "sts", "web", "--replicas=3")
    cluster.kubectl("rollout", "status", "sts/web", "--timeout=120s")
    ip_2 = cluster.kubectl_json("get", "pod", "web-2")["status"]["podIP"]
    assert wait_for("web-2 by name from web-0", lambda: resolves("web-0", "web-2.web") == ip_2, timeout=120)
    cluster.kubectl("delete", "-f", "-", input=yaml.safe_dump_all(WEB))
