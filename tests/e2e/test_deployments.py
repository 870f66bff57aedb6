"""Deployments for real: kubectl creates, rolls out, scales and deletes them, and traffic follows.

One `kubelab up --dataplane netns` cluster (3 nodes) for the module. A client pod curls the Service
by name — resolved by cluster DNS through the pod's resolv.conf — in a loop, while a Deployment's pod
is deleted: the ReplicaSet replaces it with a pod at a new IP, the Endpoints and every node's rules
change, and no answer comes from the old pod once its rules are gone. Then a rollout to a new
template replaces every pod, `kubectl scale` resizes, and deleting a Deployment (background and
foreground) takes its ReplicaSets and pods with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for

# kubectl 1.32+ sends protobuf bodies for generator commands (`create deployment`); 1.31 sends JSON.
KUBECTL_JSON_GENERATORS = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31"

CLIENT_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "curl-client", "labels": {"app": "client"}},
              "spec": {"containers": [{"name": "client", "image": "busybox:1.36", "ports": [{"containerPort": 9}]}]}}


def kubectl_generator(cluster: Cluster, *args: str) -> str:
    binary = KUBECTL_JSON_GENERATORS if os.path.exists(KUBECTL_JSON_GENERATORS) else "kubectl"
    argv = [binary, "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cluster.cache_dir), *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def pods_of(cluster: Cluster, selector: str) -> dict[str, dict[str, Any]]:
    items = cluster.kubectl_json("get", "pods", "-l", selector)["items"]
    return {p["metadata"]["name"]: p for p in items}


def running(cluster: Cluster, selector: str, count: int) -> dict[str, str] | None:
    """name -> IP of the pods, once exactly `count` are Running and Ready and none is terminating."""
    pods = pods_of(cluster, selector)
    ready = {n: p["status"].get("podIP", "") for n, p in pods.items()
             if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
             and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])}
    return ready if len(ready) == count == len(pods) else None


@pytest.fixture(scope="module")
def web(cluster: Cluster) -> Iterator[Cluster]:
    """Deployment web (3 replicas) behind Service web:5555, and a client pod."""
    out = kubectl_generator(cluster, "create", "deployment", "web", "--image=nginx:1.25", "--replicas=3",
                            "--port=8080")
    assert "deployment.apps/web created" in out
    cluster.kubectl("expose", "deployment", "web", "--port=5555", "--target-port=8080")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(CLIENT_POD))
    wait_for("the client pod", lambda: running(cluster, "app=client", 1), timeout=60)
    yield cluster


class CurlLoop:
    """`curl http://web:5555` in a loop inside the client pod's namespace. Each line is the wall-clock
    time (ns) the request *started* and its answer (the pod's name, or FAILED)."""

    def __init__(self, cluster: Cluster, url: str, out: Path) -> None:
        self.out = out
        script = (f'while :; do t=$(date +%s%N); a=$(curl -s --max-time 2 {url}) || a=FAILED; '
                  f'echo "$t $a"; done')
        argv = [sys.executable, "-m", "kubelab", "exec", "--data-dir", str(cluster.data_dir), "curl-client", "--",
                "sh", "-c", script]
        self.file = open(out, "wb")  # noqa: SIM115 - held open for the loop's life; stop() closes it
        self.proc = subprocess.Popen(argv, stdout=self.file, stderr=subprocess.DEVNULL, start_new_session=True)

    def lines(self) -> list[tuple[int, str]]:
        found = []
        for line in self.out.read_text().splitlines()[:-1]:  # the last line may be half written
            started, _, answer = line.strip().partition(" ")
            if started.isdigit():
                found.append((int(started), answer.strip() or "FAILED"))
        return found

    def answers(self, *, started_after: int = 0) -> list[str]:
        return [answer for started, answer in self.lines() if started > started_after]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own process group: sh and its curl
        self.proc.wait(timeout=30)
        self.file.close()


def test_rollout_status_and_tables(web: Cluster) -> None:
    status = web.kubectl("rollout", "status", "deployment/web", "--timeout=120s").stdout
    assert status.rstrip("\n").splitlines()[-1] == 'deployment "web" successfully rolled out'
    pods = wait_for("three web pods", lambda: running(web, "app=web", 3), timeout=60)
    table = web.kubectl("get", "deploy,rs").stdout
    rs_name = re.search(r"^replicaset\.apps/(web-[bcdfghjklmnpqrstvwxz2456789]{1,10})\s+3\s+3\s+3\s", table,
                        re.MULTILINE)
    assert rs_name, table
    assert re.search(r"^deployment\.apps/web\s+3/3\s+3\s+3\s", table, re.MULTILINE), table
    assert all(name.startswith(rs_name.group(1) + "-") for name in pods)
    events = web.kubectl("get", "events", "--field-selector", "involvedObject.name=web", "-o", "json").stdout
    messages = [e["message"] for e in json.loads(events)["items"] if e["reason"] == "ScalingReplicaSet"]
    assert f"Scaled up replica set {rs_name.group(1)} to 3" in messages


def test_deleted_pod_is_replaced_and_traffic_follows(web: Cluster, tmp_path: Path) -> None:
    before = wait_for("three web pods", lambda: running(web, "app=web", 3), timeout=60)
    loop = CurlLoop(web, "http://web:5555/", tmp_path / "answers.txt")
    try:
        wait_for("the loop to reach every pod by the Service's name",
                 lambda: set(before) <= set(loop.answers()), timeout=60)
        victim = min(before)
        old_ip = before[victim]
        web.kubectl("delete", "pod", victim)

        def replaced() -> dict[str, str] | None:
            pods = running(web, "app=web", 3)
            return pods if pods and victim not in pods else None

        after = wait_for("a replacement pod", replaced, timeout=60)
        (replacement,) = set(after) - set(before)
        new_ip = after[replacement]
        assert new_ip != old_ip and new_ip not in before.values()

        def endpoints_moved() -> bool:
            ep = web.kubectl_json("get", "endpoints", "web")
            ips = {a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []}
            return ips == set(after.values())

        wait_for("the Endpoints to list the replacement and not the old pod", endpoints_moved, timeout=60)
        for node in ("node-1", "node-2", "node-3"):
            def rules_moved(node: str = node) -> bool:
                nat = web.iptables_save(node)
                return f"default/web -> {new_ip}:8080" in nat and f"{old_ip}:8080" not in nat

            wait_for(f"{node}'s rules to drop {old_ip} and add {new_ip}", rules_moved, timeout=60)
        # Every node's rules have moved: no request started from here on may reach the old pod.
        mark = time.time_ns()
        wait_for("the replacement to answer", lambda: replacement in loop.answers(started_after=mark), timeout=60)
        wait_for("30 more answers", lambda: len(loop.answers(started_after=mark)) >= 30, timeout=120)
    finally:
        loop.stop()
    later = loop.answers(started_after=mark)
    assert victim not in later
    assert set(later) - {"FAILED"} == set(after), later
    assert victim in loop.answers()  # it was reached before, by the same name


def test_rollout_to_a_new_template_replaces_every_pod(web: Cluster) -> None:
    before = wait_for("three web pods", lambda: running(web, "app=web", 3), timeout=60)
    old_rs = web.kubectl("get", "rs", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}").stdout
    web.kubectl("set", "image", "deployment/web", "nginx=nginx:1.26")
    status = web.kubectl("rollout", "status", "deployment/web", "--timeout=180s").stdout
    lines = status.rstrip("\n").splitlines()
    assert lines[-1] == 'deployment "web" successfully rolled out'
    assert any(re.fullmatch(r'Waiting for deployment "web" rollout to finish: \d out of 3 new replicas have been '
                            r'updated\.\.\.', line) for line in lines), lines
    after = wait_for("three new pods", lambda: running(web, "app=web", 3), timeout=120)
    assert not set(after) & set(before)
    table = web.kubectl("get", "deploy,rs").stdout
    assert re.search(rf"^replicaset\.apps/{old_rs}\s+0\s+0\s+0\s", table, re.MULTILINE), table
    new_rs = [line.split()[0] for line in table.splitlines()
              if line.startswith("replicaset.apps/") and not line.startswith(f"replicaset.apps/{old_rs} ")]
    assert len(new_rs) == 1 and re.search(rf"^{re.escape(new_rs[0])}\s+3\s+3\s+3\s", table, re.MULTILINE), table
    history = web.kubectl("get", "deployment", "web", "-o",
                          "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}").stdout
    assert history == "2"
    images = {c["image"] for p in pods_of(web, "app=web").values() for c in p["spec"]["containers"]}
    assert images == {"nginx:1.26"}
    # kubectl rollout restart patches the template's restartedAt annotation: a third revision.
    web.kubectl("rollout", "restart", "deployment/web")
    web.kubectl("rollout", "status", "deployment/web", "--timeout=180s")
    restarted = wait_for("three restarted pods", lambda: running(web, "app=web", 3), timeout=120)
    assert not set(restarted) & set(after)


def test_kubectl_scale(web: Cluster) -> None:
    out = web.kubectl("scale", "deployment", "web", "--replicas=5").stdout
    assert "deployment.apps/web scaled" in out
    wait_for("five pods", lambda: running(web, "app=web", 5), timeout=90)
    web.kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    assert re.search(r"^web\s+5/5\s+5\s+5\s", web.kubectl("get", "deploy", "web").stdout, re.MULTILINE)
    web.kubectl("scale", "deployment", "web", "--replicas=2")
    wait_for("two pods", lambda: running(web, "app=web", 2), timeout=90)


def _gone(cluster: Cluster, selector: str) -> bool:
    rs = cluster.kubectl_json("get", "rs", "-l", selector)["items"]
    return not rs and not pods_of(cluster, selector)


def test_delete_deployment_background(web: Cluster) -> None:
    assert web.kubectl_json("get", "rs", "-l", "app=web")["items"]
    web.kubectl("delete", "deployment", "web")
    wait_for("web's ReplicaSets and pods to be collected", lambda: _gone(web, "app=web"), timeout=90)


def test_delete_deployment_foreground(web: Cluster) -> None:
    kubectl_generator(web, "create", "deployment", "fg", "--image=nginx:1.25", "--replicas=2", "--port=8080")
    web.kubectl("rollout", "status", "deployment/fg", "--timeout=120s")
    # --cascade=foreground sends propagationPolicy Foreground and waits until the Deployment is gone, which
    # is only once its ReplicaSet and, before that, its pods are.
    web.kubectl("delete", "deployment", "fg", "--cascade=foreground", "--timeout=120s")
    assert _gone(web, "app=fg")
    missing = web.kubectl("get", "deployment", "fg", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr


def test_no_pod_resolv_conf_left(web: Cluster) -> None:
    prefix = web.state["netnsPrefix"]

    def entries() -> list[Path]:
        return [p for p in Path("/etc/netns").glob(f"{prefix}-*") if "_default_curl-client" in p.name]

    # The pod's resolv.conf lives under /etc/netns while it runs (what `ip netns exec` mounts over
    # /etc/resolv.conf), so its removal below is not vacuous.
    assert entries(), "the running client pod has no /etc/netns entry"
    web.kubectl("delete", "pod", "curl-client")
    wait_for("the client pod's /etc/netns entry to go", lambda: not entries(), timeout=60)


if shutil.which("kubectl") is None:  # pragma: no cover - the fixture fails loudly too
    pytestmark = pytest.mark.skip("kubectl is not on PATH")
