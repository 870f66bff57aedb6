"""`kubelab up --dataplane netns` killed with SIGKILL: its etcd and its pod servers die with it, and the
next `kubelab up` on the same data dir says it cleans up after it, removes the namespaces it left, and
runs; a Ctrl-C then leaves nothing. (Its etcd used to live on, holding the data dir's lock, and the next
`kubelab up` failed after 30 s with a TimeoutError traceback.)"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from kubelab_cluster import Cluster, wait_for


def processes_of(cluster: Cluster) -> list[str]:
    """Its etcd and pod servers that still run (an etcd on its data dir counts, whoever started it)."""
    return [what for what in cluster.leftovers() if not what.startswith(("netns ", "file "))]


def namespaces_of(cluster: Cluster) -> list[str]:
    """Its network namespaces and their files in /etc/netns: a killed cluster cannot remove those."""
    return [what for what in cluster.leftovers() if what.startswith(("netns ", "file "))]


def mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[1].startswith(f"{path}/")]


def sleeps(seconds: str) -> list[str]:
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
    return [line for line in ps.splitlines() if line.split(None, 1)[-1] == f"sleep {seconds}"]


def test_a_killed_cluster_takes_its_processes_with_it_and_the_next_one_cleans_up(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces (CI runs as root)")
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH")
    data = tmp_path / "data"
    first = Cluster(data, nodes=2).start()
    second: Cluster | None = None
    try:
        first.kubectl("create", "deployment", "web", "--image=example/web:1", "--replicas=3", "--port=8080")
        wait_for("three pod servers", lambda: sum(w.startswith("pod server") for w in first.leftovers()) == 3, 120)
        # A container whose command leaves a child of its own behind: no PDEATHSIG reaches that one, the
        # container's PID namespace must take it along.
        seconds = f"{secrets.randbelow(10**6) + 10**7}"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "forker"}, "spec": {"containers": [
            {"name": "app", "image": "busybox", "command": ["sh", "-c", f"sleep {seconds} & sleep {seconds}"],
             "volumeMounts": [{"name": "mem", "mountPath": "/mem"}]}],
            "volumes": [{"name": "mem", "emptyDir": {"medium": "Memory"}}]}}
        first.kubectl("apply", "-f", "-", input=json.dumps(pod))
        wait_for("the container's two sleeps", lambda: len(sleeps(seconds)) == 2, 60)
        assert mounts_under(data)  # the memory-backed emptyDir: only the next run can unmount it
        assert first.proc is not None
        killed = first.proc.pid
        first.proc.kill()  # SIGKILL: no Ctrl-C handler, no teardown
        first.proc.wait()

        wait_for("its etcd and pod servers to die with it", lambda: not processes_of(first), 30)
        wait_for("the container's processes to die with it", lambda: not sleeps(seconds), 30)
        assert namespaces_of(first)  # what only the next run can remove

        second = Cluster(data, nodes=2).start()
        assert f"the cluster last run from {data} (pid {killed}) ended without stopping; cleaning up after it" \
               in second.log(), second.log()
        assert "namespaces left by an earlier run" in second.log()
        assert "Traceback" not in second.log()
        assert namespaces_of(first) == []  # the earlier run's are gone
        code, left = second.shutdown()
        second = None
        assert (code, left) == (0, [])
        assert first.leftovers() == []
        assert not list(data.glob("nodes/*/pods/*")), "pods' files (their Secrets) left after Ctrl-C"
        assert mounts_under(data) == []
    finally:
        if second is not None:
            second.shutdown()
        if first.proc is not None:
            first.stop()
        if first.leftovers():
            first.cleanup_after_failure()
