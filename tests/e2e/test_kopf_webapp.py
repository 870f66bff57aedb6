"""A real operator on the netns lab: examples/webapp_operator.py (kopf) runs as its own process against
`kubelab up --dataplane netns`; a WebApp applied with kubectl becomes a Deployment and a Service, and curl
from a client pod to the Service's ClusterIP reaches the WebApp's pods (their servers answer with their
pod's name) through every node's kube-proxy rules. Scaling the WebApp brings a new pod into the answers;
deleting it collects the Deployment, the Service and the pods."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubelab_cluster import Cluster, wait_for

from kubelab.processes import stop_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLIENT_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "webapp-client", "labels": {"app": "client"}},
              "spec": {"containers": [{"name": "client", "image": "busybox:1.36", "ports": [{"containerPort": 9}]}]}}


def ready_pods(cluster: Cluster, selector: str) -> set[str]:
    pods = cluster.kubectl_json("get", "pods", "-l", selector)["items"]
    return {p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])}


def test_curl_to_the_webapps_cluster_ip_reaches_its_pods(cluster: Cluster) -> None:
    log_path = cluster.data_dir.parent / "kopf-e2e.log"
    argv = [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "default", "--verbose",
            str(EXAMPLES / "webapp_operator.py")]
    with open(log_path, "wb") as log:
        operator = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)})

    def alive() -> None:
        assert operator.poll() is None, f"kopf exited:\n{log_path.read_text(errors='replace')}"

    selector = "webapp.lab.example.com/name=shop"
    try:
        cluster.kubectl("apply", "-f", str(EXAMPLES / "webapp-crd.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", "crd/webapps.lab.example.com")
        app = {"apiVersion": "lab.example.com/v1", "kind": "WebApp", "metadata": {"name": "shop"},
               "spec": {"image": "nginx:1.25", "replicas": 2, "port": 8080}}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(app))
        cluster.kubectl("apply", "-f", "-", input=json.dumps(CLIENT_POD))

        def status(ready: int) -> dict[str, Any]:
            alive()
            current = cluster.kubectl_json("get", "webapp", "shop")["status"]
            assert current.get("readyReplicas") == ready and current.get("clusterIP"), current
            return dict(current)

        cluster_ip = wait_for("the WebApp's 2 pods ready", lambda: status(2), timeout=180)["clusterIP"]
        wait_for("the client pod", lambda: ready_pods(cluster, "app=client") == {"webapp-client"}, timeout=120)

        def answered_by(want: set[str]) -> bool:
            """True once curl to the ClusterIP has been answered by every pod in `want` (and only by them)."""
            alive()
            answer = cluster.curl("webapp-client", f"http://{cluster_ip}:8080/")
            if answer:
                assert answer in want, f"{answer!r} answered, not one of the WebApp's pods {want}"
                seen.add(answer)
            return seen == want

        seen: set[str] = set()
        pods = ready_pods(cluster, selector)
        assert len(pods) == 2
        wait_for(f"curl to {cluster_ip}:8080 to reach both pods", lambda: answered_by(pods), timeout=180)

        cluster.kubectl("scale", "webapp", "shop", "--replicas=3")
        wait_for("the WebApp's 3 pods ready", lambda: status(3), timeout=180)
        seen = set()
        pods = ready_pods(cluster, selector)
        assert len(pods) == 3
        wait_for(f"curl to {cluster_ip}:8080 to reach all three pods", lambda: answered_by(pods), timeout=180)

        cluster.kubectl("delete", "webapp", "shop", "--timeout=120s")

        def collected() -> bool:
            deploys = cluster.kubectl_json("get", "deployments", "-l", selector)["items"]
            services = cluster.kubectl_json("get", "services", "-l", selector)["items"]
            return not deploys and not services and not cluster.kubectl_json("get", "pods", "-l", selector)["items"]

        wait_for("the WebApp's Deployment, Service and pods to be collected", collected, timeout=180)
        assert cluster.curl("webapp-client", f"http://{cluster_ip}:8080/") == ""
    finally:
        code = stop_process(operator, sig=signal.SIGTERM, timeout=60)
        cluster.kubectl("delete", "pod", "webapp-client", "--wait=false", check=False)
    assert code == 0, log_path.read_text(errors="replace")
