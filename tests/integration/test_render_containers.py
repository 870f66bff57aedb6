"""Containers on the render dataplane (`kubelab up --dataplane render`, no root): a command runs as a plain
process on the host with its environment and working directory, its exit code and output land where
they would in netns mode, kubelab says so in one line at start-up, and volumeMounts are refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubectltools import RenderCluster, render_cluster, wait_for

from kubeletstub import crilog


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderCluster]:
    yield from render_cluster(tmp_path_factory.mktemp("render") / "data", nodes=1)


def kubectl_json(cluster: RenderCluster, *args: str) -> Any:
    out = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args, "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def apply(cluster: RenderCluster, manifest: dict[str, Any]) -> None:
    subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), "apply", "-f", "-"],
                   input=json.dumps(manifest), text=True, capture_output=True, check=True)


def test_render_says_what_runs_in_one_line(cluster: RenderCluster) -> None:
    assert "render dataplane: a container with a command runs it as a plain process on this host" in cluster.log()


def test_a_command_runs_as_a_plain_process(cluster: RenderCluster) -> None:
    container = {"name": "job", "image": "busybox", "workingDir": "/tmp",
                 "command": ["sh", "-c", "echo $GREETING from $PWD; exit 4"], "env": [{"name": "GREETING", "value": "hi"}]}
    apply(cluster, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                    "spec": {"restartPolicy": "Never", "containers": [container]}})
    pod = wait_for("plain Failed", lambda: (p := kubectl_json(cluster, "get", "pod", "plain"))["status"].get(
        "phase") == "Failed" and p)
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (4, "Error")
    state = json.loads((cluster.data_dir / "cluster.json").read_text())
    root = Path(state["nodes"][pod["spec"]["nodeName"]]["podLogs"])
    meta = pod["metadata"]
    path = crilog.container_log_path(root, "default", "plain", meta["uid"], "job", 0)
    assert [crilog.parse_line(line).content for line in path.read_bytes().splitlines()] == [b"hi from /tmp"]


def test_volume_mounts_are_refused_clearly(cluster: RenderCluster) -> None:
    container = {"name": "app", "image": "busybox", "command": ["true"],
                 "volumeMounts": [{"name": "v", "mountPath": "/data"}]}
    apply(cluster, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vols"},
                    "spec": {"containers": [container], "volumes": [{"name": "v", "emptyDir": {}}]}})

    def waiting() -> dict[str, Any] | None:
        statuses = kubectl_json(cluster, "get", "pod", "vols")["status"].get("containerStatuses") or []
        state = (statuses[0].get("state") or {}).get("waiting") if statuses else None
        return state if state and state.get("reason") == "CreateContainerError" else None

    state = wait_for("CreateContainerError", waiting)
    assert "volumeMounts need the netns dataplane (root)" in state["message"]
