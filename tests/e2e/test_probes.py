"""Liveness and startup probes as kubelet runs them, on the netns lab (`kubelab up`) through the real kubectl:
a container whose liveness probe fails is killed and started again (RESTARTS in `kubectl get pod`, the
last state and kubelet's events in `kubectl describe`); a startup probe holds the container un-started and
unready, and keeps its liveness probe from running, until it passes; exec probes run with the container's
environment and working directory, as CRI ExecSync runs them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kubelab_cluster import Cluster, wait_for


def apply_pod(cluster: Cluster, name: str, container: dict[str, Any], **spec: Any) -> None:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "app", "image": "busybox", **container}], **spec}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def app_status(cluster: Cluster, name: str) -> dict[str, Any]:
    statuses = cluster.kubectl_json("get", "pod", name)["status"].get("containerStatuses") or [{}]
    return statuses[0]  # type: ignore[no-any-return]


def events(cluster: Cluster, name: str) -> str:
    """Each event as "REASON MESSAGE", spaces squeezed."""
    out = cluster.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}",
                          "-o", "custom-columns=REASON:.reason,MESSAGE:.message", "--no-headers").stdout
    return "\n".join(" ".join(line.split()) for line in out.splitlines())


def test_a_failing_liveness_probe_kills_and_restarts_the_container(cluster: Cluster) -> None:
    # Healthy at first, then the file the probe tests goes: the probe fails twice and kubelet kills the
    # container (sleep, PID 1, ignores SIGTERM: SIGKILL after the probe's grace period, exit 137).
    script = "touch /probe/ok; echo up; sleep 2; rm /probe/ok; exec sleep 3600"
    apply_pod(cluster, "unhealthy", {
        "command": ["sh", "-c", script], "volumeMounts": [{"name": "probe", "mountPath": "/probe"}],
        "livenessProbe": {"exec": {"command": ["test", "-f", "/probe/ok"]}, "periodSeconds": 1, "timeoutSeconds": 1,
                          "successThreshold": 1, "failureThreshold": 2, "terminationGracePeriodSeconds": 1}},
        volumes=[{"name": "probe", "emptyDir": {}}], terminationGracePeriodSeconds=60)
    status = wait_for("unhealthy restarted", lambda: (s := app_status(cluster, "unhealthy")).get("restartCount")
                      and "terminated" in (s.get("lastState") or {}) and s, timeout=120)
    last = status["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (137, "Error")
    assert status["restartCount"] >= 1
    row = cluster.kubectl("get", "pod", "unhealthy", "--no-headers").stdout.split()
    assert int(row[3]) >= 1, row  # RESTARTS: "1 (3s ago)"
    seen = events(cluster, "unhealthy")
    assert "Unhealthy Liveness probe failed:" in seen
    assert "Killing Container app failed liveness probe, will be restarted" in seen
    describe = " ".join(cluster.kubectl("describe", "pod", "unhealthy").stdout.split())
    assert "Last State: Terminated Reason: Error Exit Code: 137" in describe, describe[:4000]
    assert "Liveness: exec [test -f /probe/ok] delay=0s timeout=1s period=1s #success=1 #failure=2" in describe, describe[:4000]
    cluster.kubectl("delete", "pod", "unhealthy", "--wait=true", "--grace-period=1")


def test_with_restart_policy_never_a_failed_liveness_probe_fails_the_pod(cluster: Cluster) -> None:
    apply_pod(cluster, "doomed", {
        "command": ["sleep", "3600"],
        "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}},
        restartPolicy="Never", terminationGracePeriodSeconds=1)
    wait_for("doomed Failed", lambda: cluster.kubectl_json("get", "pod", "doomed")["status"].get("phase") == "Failed",
             timeout=120)
    status = app_status(cluster, "doomed")
    assert status["restartCount"] == 0 and status["state"]["terminated"]["exitCode"] == 137
    assert "Container app failed liveness probe" in events(cluster, "doomed")
    assert "will be restarted" not in events(cluster, "doomed")
    cluster.kubectl("delete", "pod", "doomed", "--wait=true")


def test_a_startup_probe_holds_readiness_and_liveness_until_it_passes(cluster: Cluster, tmp_path: Path) -> None:
    # The gate is a file on the host, which a container sees (kubelab has no images): the test opens it.
    gate = tmp_path / "started"
    # A generous timeout: on a loaded machine a probe that outlived 1 s would fail, and the liveness probe
    # (failureThreshold 1) would kill the container for it.
    probe = {"exec": {"command": ["test", "-f", str(gate)]}, "periodSeconds": 1, "timeoutSeconds": 30}
    apply_pod(cluster, "slowstart", {
        "command": ["sleep", "3600"],
        "startupProbe": {**probe, "failureThreshold": 600},
        # Would kill the container at its first probe if it ran before the startup probe passed.
        "livenessProbe": {**probe, "failureThreshold": 1}},
        terminationGracePeriodSeconds=1)
    wait_for("the startup probe failing", lambda: "Startup probe failed" in events(cluster, "slowstart"))
    status = app_status(cluster, "slowstart")
    assert "running" in status["state"] and status["started"] is False and status["ready"] is False
    assert cluster.kubectl("get", "pod", "slowstart", "--no-headers").stdout.split()[1] == "0/1"
    gate.touch()
    wait_for("slowstart started and ready", lambda: (s := app_status(cluster, "slowstart"))["started"]
             and s["ready"])
    assert app_status(cluster, "slowstart")["restartCount"] == 0
    assert "Liveness probe failed" not in events(cluster, "slowstart")
    cluster.kubectl("delete", "pod", "slowstart", "--wait=true", "--grace-period=1")


def test_an_exec_probe_runs_with_the_containers_environment_and_working_directory(cluster: Cluster) -> None:
    check = 'test "$FLAVOR" = mint && test "$(pwd)" = /work && test -f here'
    apply_pod(cluster, "envprobe", {
        "command": ["sh", "-c", "touch here; exec sleep 3600"], "workingDir": "/work",
        "env": [{"name": "FLAVOR", "value": "mint"}, {"name": "PATH", "value": "/nowhere:/usr/bin:/bin"}],
        "volumeMounts": [{"name": "work", "mountPath": "/work"}],
        "readinessProbe": {"exec": {"command": ["sh", "-c", check]}, "periodSeconds": 1}},
        volumes=[{"name": "work", "emptyDir": {}}], terminationGracePeriodSeconds=1)
    wait_for("envprobe Ready", lambda: app_status(cluster, "envprobe").get("ready") is True)
    cluster.kubectl("delete", "pod", "envprobe", "--wait=true")


HEALTH_SERVER = """
from concurrent import futures
import grpc
def check(request, context):
    return b"\\x08\\x01" if request == b"" else b"\\x08\\x02"  # SERVING for the server, NOT_SERVING for "db"
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
    "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}),))
server.add_insecure_port("0.0.0.0:19090")
server.start()
server.wait_for_termination()
"""


def test_grpc_probes_ask_the_standard_health_service(cluster: Cluster) -> None:
    apply_pod(cluster, "grpcprobe", {
        "command": [sys.executable, "-c", HEALTH_SERVER], "ports": [{"containerPort": 19090}],
        "readinessProbe": {"grpc": {"port": 19090}, "periodSeconds": 1},
        "livenessProbe": {"grpc": {"port": 19090, "service": "db"}, "periodSeconds": 1, "failureThreshold": 1000}},
        terminationGracePeriodSeconds=1)
    wait_for("grpcprobe Ready", lambda: app_status(cluster, "grpcprobe").get("ready") is True)
    wait_for("the db service's liveness failures", lambda: 'Unhealthy Liveness probe failed: service unhealthy '
             '(responded with "NOT_SERVING")' in events(cluster, "grpcprobe"))
    assert app_status(cluster, "grpcprobe")["restartCount"] == 0
    cluster.kubectl("delete", "pod", "grpcprobe", "--wait=true")
