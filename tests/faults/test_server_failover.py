"""`kubelab scheduler --server A,B` with two API server processes on one etcd: A is killed (SIGKILL) in
the middle of a burst of pods. The scheduler's requests and watches move to B (its watches resume from
their last resourceVersion), it keeps its Lease, and every pod is bound, none lost. How long the
bindings paused is measured, never asserted.

The burst's second half is created only after the kill: on a loaded machine the scheduler once started
after the whole burst was in, bound it all within a second, and no binding was left to come after the
kill. Now there is always work that only B can bring."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from faultkit import REPO, Figures, OwnedEtcd
from polling import GiveUp, wait_for

from kubelab.processes import stop_process

NAMESPACE = "failover"
PODS = 200


def bound(api: httpx.Client) -> dict[str, str]:
    items = api.get(f"/api/v1/namespaces/{NAMESPACE}/pods").json()["items"]
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in items}


def test_the_scheduler_moves_to_the_other_api_server_when_one_is_killed(
        own_etcd: OwnedEtcd, apiserver_process: Any, tmp_path: Path, figures: Figures) -> None:
    first, second = apiserver_process(own_etcd.url), apiserver_process(own_etcd.url)
    log_path = tmp_path / "scheduler.log"
    with httpx.Client(base_url=second.url, timeout=30) as api:
        api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": NAMESPACE}}).raise_for_status()
        status = {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
        for i in range(2):
            api.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"},
                                            "status": status}).raise_for_status()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "kubelab", "scheduler", "--server", f"{first.url},{second.url}",
                                     "--metrics-bind-address", ""], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                    env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
        try:
            errors: list[Exception] = []
            killed = threading.Event()

            def create() -> None:
                try:
                    with httpx.Client(base_url=second.url, timeout=60) as writer:
                        for i in range(PODS):
                            if i == PODS // 2 and not killed.wait(300):
                                raise TimeoutError("A was never killed")
                            writer.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json={
                                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}"},
                                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                            }).raise_for_status()
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            creator = threading.Thread(target=create, name="pod-burst")
            creator.start()

            def quarter_bound() -> bool:
                if proc.poll() is not None:
                    raise GiveUp(f"the scheduler exited:\n{log_path.read_text()[-3000:]}")
                return sum(1 for n in bound(api).values() if n) >= PODS // 4

            wait_for("a quarter of the pods to be bound", quarter_bound, 180)
            before = sum(1 for n in bound(api).values() if n)
            killed_at = time.monotonic()
            first.kill()
            killed.set()

            def bound_more() -> bool:
                if proc.poll() is not None:
                    raise GiveUp(f"the scheduler exited:\n{log_path.read_text()[-3000:]}")
                return sum(1 for n in bound(api).values() if n) > before

            try:
                wait_for("a binding after the kill", bound_more, 120)
            except AssertionError as exc:  # what the scheduler was doing, which pytest's temp dirs do not keep
                raise AssertionError(f"{exc}; the scheduler's log:\n{log_path.read_text()[-6000:]}") from None
            resumed_at = time.monotonic()
            creator.join(300)
            assert not errors, errors
            pods = wait_for(f"all {PODS} pods bound",
                            lambda: (p := bound(api)) and len(p) == PODS and all(p.values()) and p, 300)
            assert len(pods) == PODS and all(pods.values())
            assert proc.poll() is None  # it did not die with the API server it was using
            lease = api.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler").json()
            assert (lease["spec"].get("leaseTransitions") or 0) == 0  # it kept leading throughout
            assert "cannot be reached: using " + second.url in log_path.read_text()
            figures.update(pods=PODS, bound_before_kill=before, kill_to_next_binding_s=round(resumed_at - killed_at, 2))
        finally:
            killed.set()  # the creator does not wait for a kill that a failure above skipped
            stop_process(proc)
