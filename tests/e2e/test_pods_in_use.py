"""What a Kubernetes user does with a pod first, end to end on the netns lab (`kubelab up`): the runtime
runs the command, the kubelet API serves it, the API server's subresources reach the kubelet, and the real
kubectl (1.29 over SPDY, 1.33 over WebSocket) shows it. `kubectl logs` of a job that exits 3, `kubectl
exec` into a container that runs a command of its own (its hostname, volume, environment and PID 1),
`kubectl run -i --rm` with stdin, and the built-in server's request lines in `kubectl logs`."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for

KUBECTL = {"1.29": "/usr/lib/google-cloud-sdk/bin/kubectl.1.29", "1.33": "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"}


def kubectl(cluster: Cluster, version: str, *args: str, input: str | None = None,
            timeout: float = 90) -> subprocess.CompletedProcess[str]:
    argv = [KUBECTL[version], "--kubeconfig", str(cluster.kubeconfig), "--cache-dir",
            str(cluster.cache_dir / version), *args]
    return subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout, check=False)


def pod(name: str, script: str, *, restart: str = "Never", **extra: Any) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"restartPolicy": restart,
                                "containers": [{"name": "main", "image": "busybox",
                                                "command": ["sh", "-c", script], **extra}]}})


def phase(cluster: Cluster, name: str) -> str:
    return str(cluster.kubectl_json("get", "pod", name)["status"].get("phase"))


def test_kubectl_logs_shows_what_a_failed_job_printed(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", input=pod("job3", "echo starting; echo oops >&2; exit 3"))
    wait_for("job3 Failed", lambda: phase(cluster, "job3") == "Failed")
    for version in KUBECTL:
        logs = kubectl(cluster, version, "logs", "job3")
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout == "starting\noops\n"
    tail = kubectl(cluster, "1.33", "logs", "job3", "--tail=1", "--timestamps")
    stamp, _, line = tail.stdout.rstrip("\n").partition(" ")
    assert line == "oops" and stamp.endswith("Z")
    status = cluster.kubectl_json("get", "pod", "job3")["status"]["containerStatuses"][0]
    assert status["state"]["terminated"]["exitCode"] == 3
    cluster.kubectl("delete", "pod", "job3", "--wait=true")


@pytest.mark.parametrize("version", list(KUBECTL))
def test_kubectl_exec_enters_the_container_that_runs_a_command(cluster: Cluster, version: str) -> None:
    name = f"sleeper-{version.replace('.', '')}"
    spec = pod(name, "echo ready > /data/mark; exec sleep 3600", restart="Always",
               env=[{"name": "GREETING", "value": "hello"}],
               volumeMounts=[{"name": "data", "mountPath": "/data"}])
    manifest = json.loads(spec)
    manifest["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    wait_for(f"{name} Running", lambda: phase(cluster, name) == "Running")
    script = 'echo "$(hostname) $GREETING $(cat /data/mark) $(cat /proc/1/cmdline | tr "\\0" " ")"'
    result = kubectl(cluster, version, "exec", name, "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{name} hello ready sleep 3600 \n"
    failed = kubectl(cluster, version, "exec", name, "--", "sh", "-c", "exit 4")
    assert failed.returncode == 4
    assert "command terminated with exit code 4" in failed.stderr
    cluster.kubectl("delete", "pod", name, "--wait=true", "--grace-period=1")


@pytest.mark.parametrize("version", list(KUBECTL))
def test_kubectl_run_interactive_reads_stdin_and_is_removed(cluster: Cluster, version: str) -> None:
    name = f"asker-{version.replace('.', '')}"
    result = kubectl(cluster, version, "run", name, "-i", "--rm", "--restart=Never", "--image=busybox",
                     "--pod-running-timeout=60s", "--", "sh", "-c", "read answer; echo got $answer",
                     input="forty-two\n")
    assert result.returncode == 0, result.stderr
    assert "got forty-two" in result.stdout
    wait_for(f"{name} removed", lambda: name not in cluster.kubectl("get", "pods", "-o", "name").stdout)


def test_kubectl_logs_shows_the_built_in_servers_requests(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "server"},
         "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 8080}]}]}}))
    wait_for("server Running", lambda: phase(cluster, "server") == "Running")
    ip = cluster.kubectl_json("get", "pod", "server")["status"]["podIP"]
    node = cluster.kubectl_json("get", "pod", "server")["spec"]["nodeName"]
    answer = cluster.exec(node, "curl", "-s", "--max-time", "5", f"http://{ip}:8080/")
    assert answer.stdout.strip() == "server"
    logs = wait_for("the request line", lambda: (out := kubectl(cluster, "1.33", "logs", "server").stdout)
                    and '"GET / HTTP/1.1" 200' in out and out)
    assert f"-> {ip}:8080" in logs
    cluster.kubectl("delete", "pod", "server", "--wait=true")
