"""`kubelab up` runs its scheduler in a child process of its own (launcher/upscheduler.py), so that its
bindings' answers do not wait for the event loop that runs every node (issue 24):

* while up: the scheduler is a child of `kubelab up` (cluster.json's `scheduler.pid`, `kubelab status`
  shows it) serving its metrics at the address cluster.json records, and pods are bound;
* the child SIGKILLed is started again (a new pid, "restarts 1", the log says so) on the same metrics
  address, and a pod created afterwards is bound;
* Ctrl-C: exit 0, and neither child is left;
* `--one-process` keeps the scheduler in `kubelab up`'s process (no child, no record).

Render dataplane (no root needed). No timing is asserted; waits are generous for a loaded machine."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import polling
import pytest
from procfs import alive, parent
from upprocess import REPO, start_up, wait_until_up

from kubelab.etcd import free_port
from kubelab.processes import stop_process

NS = "/api/v1/namespaces/default"


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def _bound(http: httpx.Client, name: str) -> str | None:
    node: str | None = http.get(f"{NS}/pods/{name}").json()["spec"].get("nodeName")
    return node


def _state(data: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((data / "cluster.json").read_text())
    return state


def _status(data: Path) -> str:
    return subprocess.run([sys.executable, "-m", "kubelab", "status", "--data-dir", str(data)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=REPO).stdout


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_the_scheduler_runs_in_a_child_restarted_when_killed(tmp_path: Path) -> None:
    data, port, log = tmp_path / "data", free_port(), tmp_path / "up.log"
    up = start_up(["--dataplane", "render", "--nodes", "2", "--data-dir", str(data), "--listen",
                   f"127.0.0.1:{port}"], log)
    pids: list[int] = []
    try:
        wait_until_up(up, log)
        first = _state(data)["scheduler"]
        pids.append(first["pid"])
        assert first["pid"] != up.pid and parent(first["pid"]) == up.pid
        assert b"launcher.upscheduler" in Path(f"/proc/{first['pid']}/cmdline").read_bytes()
        assert _state(data)["metrics"]["scheduler"] == first["metrics"]
        assert f"scheduler   pid {first['pid']}, running, restarts 0" in _status(data)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert http.post(f"{NS}/pods", json=_pod("before")).status_code == 201
            polling.wait_for("pod before bound", lambda: _bound(http, "before"), 120, retry_on=())
            assert "scheduler_schedule_attempts_total" in httpx.get(first["metrics"], timeout=10).text

            os.kill(first["pid"], signal.SIGKILL)

            def restarted() -> dict[str, Any] | None:
                record: dict[str, Any] = _state(data)["scheduler"]
                return record if record["pid"] != first["pid"] else None
            again = polling.wait_for("kubelab up to start its scheduler again", restarted, 120, retry_on=())
            pids.append(again["pid"])
            assert again["restarts"] == 1 and again["metrics"] == first["metrics"]
            assert parent(again["pid"]) == up.pid and not alive(first["pid"])
            assert (f"scheduler   was killed by SIGKILL (pid {first['pid']}); starting it again now (restart 1)"
                    in log.read_text())
            assert http.post(f"{NS}/pods", json=_pod("after")).status_code == 201
            polling.wait_for("pod after bound", lambda: _bound(http, "after"), 120, retry_on=())
            polling.wait_for("the metrics on the same address", lambda: "scheduler_schedule_attempts_total" in
                             httpx.get(first["metrics"], timeout=10).text, 60)
        assert f"scheduler   pid {again['pid']}, running, restarts 1" in _status(data)
        up.send_signal(signal.SIGINT)
        assert up.wait(120) == 0, log.read_text()[-4000:]
        assert [pid for pid in pids if alive(pid)] == []
        assert "Traceback" not in log.read_text()
    finally:
        if up.poll() is None:
            stop_process(up)
        for pid in pids:  # ours (children of the kubelab up this test started), if its stop left them
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_one_process_keeps_the_scheduler_in_kubelab_up(tmp_path: Path) -> None:
    data, port, log = tmp_path / "data", free_port(), tmp_path / "up.log"
    up = start_up(["--one-process", "--dataplane", "render", "--nodes", "1", "--data-dir", str(data), "--listen",
                   f"127.0.0.1:{port}"], log)
    try:
        wait_until_up(up, log)
        assert "scheduler" not in _state(data)
        assert [c for c in _children(up.pid) if b"launcher.upscheduler" in Path(f"/proc/{c}/cmdline").read_bytes()] == []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert http.post(f"{NS}/pods", json=_pod("inside")).status_code == 201
            polling.wait_for("pod inside bound", lambda: _bound(http, "inside"), 120, retry_on=())
        up.send_signal(signal.SIGINT)
        assert up.wait(120) == 0
    finally:
        if up.poll() is None:
            stop_process(up)


async def test_a_scheduler_process_that_exits_before_it_is_ready_fails_the_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A first start that cannot work is not retried (as for the API server's process): `kubelab up` stops
    with the reason rather than waiting for a scheduler that never comes."""
    from launcher import upscheduler

    monkeypatch.setattr(upscheduler, "argv", lambda *a, **k: [sys.executable, "-c", "raise SystemExit(3)"])
    child = upscheduler.SchedulerProcess("/nonexistent.sock", None)
    with pytest.raises(RuntimeError, match=r"the scheduler's process \(pid \d+\) exited with code 3 before it was "
                                           "ready"):
        await asyncio.wait_for(child.run(), 60)
    assert not alive(child.pid or 0)
