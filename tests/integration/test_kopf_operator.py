"""A real operator on kubelab: examples/webapp_operator.py, written with kopf, run as its own process
(`kopf run`, logged in through the cluster's kubeconfig) against `kubelab up --dataplane render`, driven with
the real kubectl. What kopf needs from the API and gets here as from kube-apiserver: discovery of a CRD that
appears while it runs, watches with bookmarks, JSON patches of metadata.finalizers guarded by a `test` of
resourceVersion, merge patches of the status subresource, core/v1 events about a custom object, and (when
not --standalone) merge patches of its KopfPeering's status; what the operator gets: owner references from
its children to the WebApp, which the garbage collector follows when the WebApp goes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubectltools import Kubectl, RenderCluster, wait_for

from kubelab.processes import stop_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPERATOR = EXAMPLES / "webapp_operator.py"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderCluster]:
    pytest.importorskip("kopf")
    cluster = RenderCluster(tmp_path_factory.mktemp("kopf") / "data", nodes=1)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kubectl(cluster: RenderCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    kubectl = Kubectl("dispatcher", cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
    kubectl.ok("create", "namespace", "shop")
    kubectl.ok("create", "namespace", "peers")
    return kubectl


class Operator:
    """`kopf run` of the example in its own process; its log in a file for failure messages. Stopped with
    SIGTERM to its PID (kopf's graceful stop: it unregisters from its peering before exiting)."""

    def __init__(self, cluster: RenderCluster, namespace: str, *args: str) -> None:
        self.log_path = cluster.data_dir.parent / f"kopf-{namespace}.log"
        argv = [sys.executable, "-m", "kopf", "run", "--namespace", namespace, "--verbose", *args, str(OPERATOR)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)})

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> None:
        assert self.proc.poll() is None, f"kopf exited with {self.proc.returncode}:\n{self.log()}"

    def stop(self) -> int | None:
        return stop_process(self.proc, sig=signal.SIGTERM, timeout=60)


def get(kubectl: Kubectl, *args: str) -> dict[str, Any] | None:
    result = kubectl("get", *args, "-o", "json")
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def webapp(name: str, *, replicas: int, image: str = "nginx:1.25", port: int = 8080) -> dict[str, Any]:
    return {"apiVersion": "lab.example.com/v1", "kind": "WebApp", "metadata": {"name": name},
            "spec": {"image": image, "replicas": replicas, "port": port}}


def test_the_operator_creates_updates_and_collects_a_webapps_children(cluster: RenderCluster,
                                                                     kubectl: Kubectl) -> None:
    ns = ("-n", "shop")
    # The operator starts before its CRD exists: kopf watches CustomResourceDefinitions and starts serving
    # WebApps once the definition is there, as on kube.
    operator = Operator(cluster, "shop", "--standalone")
    try:
        kubectl.ok("apply", "-f", str(EXAMPLES / "webapp-crd.yaml"))
        kubectl.ok("wait", "--for=condition=Established", "crd/webapps.lab.example.com")
        kubectl.ok(*ns, "apply", "-f", "-", input=json.dumps(webapp("hello", replicas=2)))
        app = get(kubectl, *ns, "webapp", "hello")
        assert app is not None

        def children() -> tuple[dict[str, Any], dict[str, Any]]:
            operator.alive()
            deploy, svc = get(kubectl, *ns, "deployment", "hello"), get(kubectl, *ns, "service", "hello")
            assert deploy is not None and svc is not None
            return deploy, svc

        deploy, svc = wait_for("the WebApp's Deployment and Service", children, timeout=120)
        owner = {"apiVersion": "lab.example.com/v1", "kind": "WebApp", "name": "hello",
                 "uid": app["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        assert deploy["metadata"]["ownerReferences"] == [owner]
        assert svc["metadata"]["ownerReferences"] == [owner]
        assert deploy["spec"]["replicas"] == 2
        assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
        assert svc["spec"]["ports"][0]["port"] == 8080

        def status(ready: int) -> dict[str, Any]:
            operator.alive()
            current = get(kubectl, *ns, "webapp", "hello")
            assert current is not None
            assert current["status"].get("readyReplicas") == ready, current.get("status")
            return current

        # The status subresource, merge-patched by the operator: the Service's address from the create
        # handler, the Deployment's counts from its watch of Deployments.
        current = wait_for("the WebApp's status to show 2 ready replicas", lambda: status(2), timeout=120)
        assert current["status"]["clusterIP"] == svc["spec"]["clusterIP"]
        assert current["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
        rows = kubectl.ok(*ns, "get", "webapp", "hello", "--no-headers").split()
        assert rows[:4] == ["hello", "nginx:1.25", "2", "2"]  # the CRD's printer columns
        events = kubectl.ok(*ns, "get", "events", "--field-selector", "involvedObject.kind=WebApp",
                            "-o", "jsonpath={.items[*].reason}")
        assert "Created" in events.split()

        # `kubectl scale` through the CRD's scale subresource changes spec.replicas; the operator's update
        # handler follows with the Deployment, and the status follows the Deployment.
        kubectl.ok(*ns, "scale", "webapp", "hello", "--replicas=3")

        def scaled() -> dict[str, Any]:
            deploy = get(kubectl, *ns, "deployment", "hello")
            assert deploy is not None and deploy["spec"]["replicas"] == 3
            return deploy

        wait_for("the Deployment to follow the WebApp to 3 replicas", scaled, timeout=120)
        wait_for("the WebApp's status to show 3 ready replicas", lambda: status(3), timeout=120)
        kubectl.ok(*ns, "patch", "webapp", "hello", "--type=merge", "-p", '{"spec": {"image": "nginx:1.26"}}')

        def rolled() -> bool:
            operator.alive()
            deploy = get(kubectl, *ns, "deployment", "hello")
            assert deploy is not None
            return bool(deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26")

        wait_for("the Deployment to roll to nginx:1.26", rolled, timeout=120)
        kubectl.ok(*ns, "rollout", "status", "deployment/hello", "--timeout=120s")

        # Deleting the WebApp: kopf's delete handler runs and takes its finalizer off (kubectl waits for
        # that), then the garbage collector deletes the children through their owner references.
        kubectl.ok(*ns, "delete", "webapp", "hello", "--timeout=120s")

        def collected() -> bool:
            left = [get(kubectl, *ns, kind, "hello") for kind in ("deployment", "service")]
            pods = json.loads(kubectl.ok(*ns, "get", "pods", "-o", "json"))["items"]
            return left == [None, None] and not pods

        wait_for("the Deployment, Service and pods to be collected", collected, timeout=120)
        events = kubectl.ok(*ns, "get", "events", "--field-selector", "involvedObject.kind=WebApp",
                            "-o", "jsonpath={.items[*].reason}")
        assert "Deleting" in events.split()
        operator.alive()
    finally:
        code = operator.stop()
    assert code == 0, operator.log()


def test_the_operator_registers_in_its_peering_and_leaves_it_on_exit(cluster: RenderCluster,
                                                                     kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", str(EXAMPLES / "webapp-crd.yaml"))
    kubectl.ok("apply", "-f", str(EXAMPLES / "kopf-peering-crd.yaml"))
    kubectl.ok("wait", "--for=condition=Established", "crd/kopfpeerings.kopf.dev")
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "default"}}
    kubectl.ok("-n", "peers", "apply", "-f", "-", input=json.dumps(peering))
    operator = Operator(cluster, "peers")  # not --standalone: kopf keeps itself alive in KopfPeering "default"
    try:
        def registered() -> dict[str, Any]:
            operator.alive()
            current = get(kubectl, "-n", "peers", "kopfpeering", "default")
            assert current is not None and current.get("status"), current
            return dict(current["status"])

        peers = wait_for("kopf to write itself into the peering's status", registered, timeout=120)
        [(identity, entry)] = peers.items()
        assert entry["lifetime"] == 60 and "lastseen" in entry, entry
        # And it serves: a WebApp here gets its children as in standalone mode.
        kubectl.ok("-n", "peers", "apply", "-f", "-", input=json.dumps(webapp("peered", replicas=1)))
        def deployed() -> dict[str, Any] | None:
            operator.alive()
            return get(kubectl, "-n", "peers", "deployment", "peered")

        wait_for("the peered WebApp's Deployment", deployed, timeout=120)
        kubectl.ok("-n", "peers", "delete", "webapp", "peered", "--timeout=120s")  # kopf's finalizer off
    finally:
        code = operator.stop()
    assert code == 0, operator.log()
    # On a graceful exit kopf removes its own key from the peering's status (a merge patch with null).
    current = get(kubectl, "-n", "peers", "kopfpeering", "default")
    assert current is not None and identity not in (current.get("status") or {}), current
