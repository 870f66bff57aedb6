"""`kubelab up` runs its API server in a child process of its own (launcher/upapiserver.py) and everything
else in its own process, so two cores are used; still one command and one Ctrl-C (issue 24):

* while up: two processes, the API server's a child of `kubelab up` (cluster.json's `apiservers[0].pid`,
  `kubelab status` shows it), and the cluster works through it (nodes Ready, a pod scheduled and Running,
  the pod reaching the API at the kubernetes Service through the lab listener the child was handed); the
  nodes' rules written at nice 19, the components' loop and the API server at the niceness they began with;
* the child SIGKILLed is started again (a new pid, "restarts 1" in cluster.json and `kubelab status`, the
  log says so) and the components carry on through it: a pod created afterwards runs;
* Ctrl-C: exit 0, and no process (up, both API server processes, etcd), no socket, no namespace is left;
* `--one-process` keeps the API server in `kubelab up`'s process (one process; cluster.json says so).

No timing is asserted; waits are generous for a loaded machine."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubelab_cluster import Cluster, wait_for
from procfs import alive, parent
from upprocess import start_up, wait_until_up

from kubelab.etcd import free_port
from kubelab.processes import stop_process


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}


def _reaches_the_api(cluster: Cluster, pod: str) -> bool:
    """The kubernetes Service answers inside the pod: only if the lab listener (handed to the child) serves."""
    result = cluster.exec(f"default/{pod}", "curl", "-sk", "--max-time", "10", "https://10.96.0.1/readyz",
                          check=False)
    return result.returncode == 0 and result.stdout.strip() == "ok"


def _running(cluster: Cluster, name: str) -> bool:
    return cluster.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}", check=False).stdout == "Running"


def _status(cluster: Cluster) -> str:
    return cluster.kubelab("status", "--data-dir", str(cluster.data_dir)).stdout


def _nice(pid: int, nice: int, *, main: bool = False) -> bool:
    """Whether the process's main thread (`main`), or any of its threads, runs at `nice` now."""
    tids = [str(pid)] if main else [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
    for tid in tids:
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a thread that has just ended
            continue
        if int(fields[16]) == nice:  # field 19
            return True
    return False


@pytest.fixture
def started(tmp_path: Path, root_and_tools: None) -> Any:
    clusters: list[Cluster] = []
    yield clusters
    for cluster in clusters:
        if cluster.proc is not None:
            cluster.shutdown()


def test_the_apiserver_runs_in_a_child_restarted_when_killed_and_ctrl_c_leaves_nothing(
        tmp_path: Path, started: list[Cluster]) -> None:
    cluster = Cluster(tmp_path / "data", nodes=2)
    started.append(cluster)
    cluster.start()
    state = json.loads((cluster.data_dir / "cluster.json").read_text())
    up_pid = state["pid"]
    first = state["apiservers"][0]
    assert up_pid == cluster.pid and first["pid"] != up_pid
    assert alive(up_pid) and alive(first["pid"])
    assert parent(first["pid"]) == up_pid
    assert b"launcher.upapiserver" in Path(f"/proc/{first['pid']}/cmdline").read_bytes()
    status = _status(cluster)
    assert f"cluster     pid {up_pid}" in status, status
    assert f"apiserver   {cluster.server} (ready) pid {first['pid']}, running, restarts 0" in status, status
    wait_for("both nodes Ready", lambda: cluster.kubectl(
        "get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}").stdout
        == "True True", 120)
    # The nodes' rules are written at nice 19 (their command threads, and the iptables they start), the
    # components' event loop and the API server's process at the niceness they started with.
    wait_for("the nodes' rule-writing threads at nice 19", lambda: _nice(up_pid, 19), 120)
    assert _nice(up_pid, 0, main=True) and _nice(first["pid"], 0, main=True)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_pod("before")))
    wait_for("pod before Running", lambda: _running(cluster, "before"), 180)
    wait_for("pod before reaching the API", lambda: _reaches_the_api(cluster, "before"), 120)

    os.kill(first["pid"], signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        record: dict[str, Any] = json.loads((cluster.data_dir / "cluster.json").read_text())["apiservers"][0]
        return record if record["pid"] != first["pid"] and record["state"] == "running" else None
    again = wait_for("kubelab up to start its API server again", restarted, 240)
    assert again["restarts"] == 1 and again["url"] == cluster.server
    assert alive(again["pid"]) and not alive(first["pid"]) and parent(again["pid"]) == up_pid
    assert f"apiserver   {cluster.server} (ready) pid {again['pid']}, running, restarts 1" in _status(cluster)
    assert f"apiserver   was killed by SIGKILL (pid {first['pid']}); starting it again now (restart 1)" in cluster.log()
    # The scheduler, the controllers and the kubelets reach the new process on the same private socket.
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_pod("after")))
    wait_for("pod after Running", lambda: _running(cluster, "after"), 240)
    wait_for("pod after reaching the API", lambda: _reaches_the_api(cluster, "after"), 120)
    private = Path(state.get("privateSocket") or cluster.data_dir / "apiserver.sock")
    assert private.exists()

    etcd_pid = int(json.loads((cluster.data_dir / "etcd.pid").read_text())["pid"])
    code, left = cluster.shutdown()
    assert code == 0, cluster.log()[-4000:]
    assert not left, left
    assert [pid for pid in (up_pid, first["pid"], again["pid"], etcd_pid) if alive(pid)] == []
    assert not private.exists()
    assert not (cluster.data_dir / "control.sock").exists()
    assert not (cluster.data_dir / "cluster.json").exists()
    assert "Traceback" not in cluster.log()


def test_one_process_keeps_the_apiserver_in_kubelab_up(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    log = tmp_path / "up.log"
    up = start_up(["--one-process", "--dataplane", "render", "--nodes", "1", "--data-dir", str(data), "--listen",
                   f"127.0.0.1:{port}"], log)
    try:
        wait_until_up(up, log)
        state = json.loads((data / "cluster.json").read_text())
        assert state["apiservers"][0]["pid"] == state["pid"] == up.pid
        children = Path(f"/proc/{up.pid}/task/{up.pid}/children").read_text().split()
        assert [c for c in children if b"launcher.upapiserver" in Path(f"/proc/{c}/cmdline").read_bytes()] == []
        up.send_signal(signal.SIGINT)
        assert up.wait(120) == 0
        assert not (data / "cluster.json").exists() and not (data / "apiserver.sock").exists()
    finally:
        if up.poll() is None:
            stop_process(up)
