"""The pod garbage collector against a real API server and etcd: pods bound to a deleted node, terminated
pods over the threshold and unscheduled terminating pods are marked Failed and force-deleted as
kube-controller-manager's podgc does; pods on live nodes are left alone.

The collector runs with short periods (kube's integration tests do the same with NewPodGCInternal) and
sees only this module's namespace, so other modules' pods in the shared etcd are not its business.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from apitools import CORE, ns_path, unique_name
from test_workload_controllers import wait_for

from controllers.podgc import PodGCController
from kubelab import kinds
from kubelab.client import ApiClient, Informer

HOLD = "test.kubelab.dev/hold"


@contextlib.asynccontextmanager
async def pod_gc(url: str, namespace: str, *, threshold: int = 12500) -> AsyncIterator[None]:
    api = ApiClient(url, user_agent="kubelab-podgc-test")
    nodes, pods = Informer(api, kinds.NODES), Informer(api, kinds.PODS, namespace=namespace)
    gc = PodGCController(api, nodes, pods, terminated_pod_threshold=threshold, check_period=0.1, quarantine=0.3)
    tasks = [asyncio.create_task(t) for t in (nodes.run(), pods.run(), gc.run())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()


async def post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await http.post(path, json=body)
    assert resp.status_code == 201, resp.text
    return resp.json()  # type: ignore[no-any-return]


async def make_pod(http: httpx.AsyncClient, ns: str, name: str, *, node: str = "", phase: str = "Running",
                   reason: str | None = None, hold: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"finalizers": [HOLD]} if hold else {})}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}], **({"nodeName": node} if node else {})}
    created = await post(http, ns_path("pods", ns), {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                                      "spec": spec})
    if node:
        status: dict[str, Any] = {"phase": phase, **({"reason": reason} if reason else {})}
        resp = await http.patch(ns_path("pods", ns, name) + "/status", json={"status": status},
                                headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text
        return resp.json()  # type: ignore[no-any-return]
    return created


async def get_pod(http: httpx.AsyncClient, ns: str, name: str) -> dict[str, Any] | None:
    resp = await http.get(ns_path("pods", ns, name))
    if resp.status_code == 404:
        return None
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


async def release(http: httpx.AsyncClient, ns: str, name: str) -> None:
    resp = await http.patch(ns_path("pods", ns, name), json={"metadata": {"finalizers": None}},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code in (200, 404), resp.text


async def namespace(http: httpx.AsyncClient) -> str:
    ns = unique_name("podgc")
    await post(http, f"{CORE}/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return ns


async def test_pods_of_a_deleted_node_are_failed_then_deleted(apiserver: str) -> None:
    async with httpx.AsyncClient(base_url=apiserver, timeout=10) as http:
        ns = await namespace(http)
        gone, alive = unique_name("gone-node"), unique_name("live-node")
        for node in (gone, alive):
            await post(http, f"{CORE}/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        # The finalizer keeps the orphan visible after its deletion, so what was written on it can be read.
        await make_pod(http, ns, "orphan", node=gone, hold=True)
        await make_pod(http, ns, "orphan-done", node=gone, phase="Succeeded")
        kept = await make_pod(http, ns, "kept", node=alive)
        assert (await http.delete(f"{CORE}/nodes/{gone}")).status_code == 200
        try:
            async with pod_gc(apiserver, ns):
                orphan = await wait_for("the orphan deleted", lambda: _deleting(http, ns, "orphan"))
                await wait_for("the finished orphan gone", lambda: _absent(http, ns, "orphan-done"))
        finally:
            await release(http, ns, "orphan")
            await http.delete(f"{CORE}/nodes/{alive}")
        assert orphan["status"]["phase"] == "Failed"
        condition = next(c for c in orphan["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "True", "DeletionByPodGC", "PodGC: node no longer exists")
        assert orphan["metadata"]["deletionGracePeriodSeconds"] == 0
        # The pod on a live node was not touched.
        now = await get_pod(http, ns, "kept")
        assert now is not None and now["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]


async def _deleting(http: httpx.AsyncClient, ns: str, name: str) -> dict[str, Any] | None:
    pod = await get_pod(http, ns, name)
    return pod if pod is not None and pod["metadata"].get("deletionTimestamp") else None


async def _absent(http: httpx.AsyncClient, ns: str, name: str) -> bool:
    return await get_pod(http, ns, name) is None


async def test_terminated_pods_over_the_threshold_go_evicted_first_then_oldest(apiserver: str) -> None:
    async with httpx.AsyncClient(base_url=apiserver, timeout=10) as http:
        ns = await namespace(http)
        node = unique_name("node")
        await post(http, f"{CORE}/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        try:
            # Creation timestamps have one-second precision: names break the ties in creation order.
            for name, phase, reason in (("a-done", "Succeeded", None), ("b-done", "Succeeded", None),
                                        ("c-evicted", "Failed", "Evicted"), ("d-running", "Running", None)):
                await make_pod(http, ns, name, node=node, phase=phase, reason=reason)
            async with pod_gc(apiserver, ns, threshold=1):
                await wait_for("two terminated pods collected",
                               lambda: _names(http, ns, lambda names: len(names) == 2))
                # Nothing more goes on later passes: one terminated pod is under the threshold.
                await asyncio.sleep(0.5)
            assert await _names(http, ns, lambda _: True) == ["b-done", "d-running"]
        finally:
            await http.delete(f"{CORE}/nodes/{node}")


async def _names(http: httpx.AsyncClient, ns: str, ok: Callable[[list[str]], bool]) -> list[str] | None:
    resp = await http.get(ns_path("pods", ns))
    names = sorted(p["metadata"]["name"] for p in resp.json()["items"])
    return names if ok(names) else None


async def test_unscheduled_terminating_pods_are_failed(apiserver: str) -> None:
    async with httpx.AsyncClient(base_url=apiserver, timeout=10) as http:
        ns = await namespace(http)
        await make_pod(http, ns, "pending", hold=True)
        await make_pod(http, ns, "waiting")
        assert (await http.delete(ns_path("pods", ns, "pending"))).status_code == 200
        try:
            async with pod_gc(apiserver, ns):
                failed = await wait_for("the unscheduled terminating pod failed",
                                        lambda: _phase(http, ns, "pending", "Failed"))
        finally:
            await release(http, ns, "pending")
        assert not any(c["type"] == "DisruptionTarget" for c in failed["status"].get("conditions") or [])
        waiting = await get_pod(http, ns, "waiting")
        assert waiting is not None and waiting["status"]["phase"] == "Pending"


async def _phase(http: httpx.AsyncClient, ns: str, name: str, phase: str) -> dict[str, Any] | None:
    pod = await get_pod(http, ns, name)
    return pod if pod is not None and pod["status"].get("phase") == phase else None
