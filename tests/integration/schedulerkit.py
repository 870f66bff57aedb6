"""Helpers for the scheduler's integration tests: manifests, a scheduler running in the test's event
loop against the real API server, and waiting for what it does.

Every scheduler test runs its own scheduler under a unique schedulerName, so pending pods other test
modules left behind are never its business, and gives its pods a unique namespace. Nodes are
cluster-scoped and every node counts in "0/N nodes are available", so `fresh_nodes()` first deletes
the nodes finished tests left behind (tests run one at a time) and `cleanup()` deletes what a test made.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from kubelab import kinds
from kubelab.client import ApiClient, NotFound
from kubelab.models import Event, Pod
from scheduler.scheduling import Scheduler

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def node_body(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
              taints: list[dict[str, str]] | None = None, labels: dict[str, str] | None = None,
              ready: str | None = "True") -> dict[str, Any]:
    """A Node as kwok or scheduler_perf registers one: status and all, in one create."""
    status: dict[str, Any] = {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                              "allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": status}


def pod_body(name: str, scheduler: str, *, cpu: str | None = "100m", memory: str | None = None,
             **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    if requests:
        container["resources"] = {"requests": requests}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "containers": [container], **spec}}


async def wait_for(check: Callable[[], Awaitable[T | None]], what: str, timeout: float = 60.0) -> T:
    """Poll `check` until it returns something other than None or False. The deadline only turns a
    hang into a failure that says what never happened; no test asserts on how long anything took."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: T | None = None
    while asyncio.get_running_loop().time() < deadline:
        last = await check()
        if last is not None and last is not False:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last seen: {last!r})")


async def fresh_nodes(api: ApiClient) -> None:
    """Delete every node: leftovers of finished tests would otherwise count as candidates."""
    nodes, _ = await api.list(kinds.NODES)
    for node in nodes:
        try:
            await api.delete(kinds.NODES, node.metadata.name)
        except NotFound:
            pass


async def create_namespace(api: ApiClient, name: str) -> None:
    await api.create(kinds.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def cleanup(api: ApiClient, namespace: str, nodes: list[str]) -> None:
    pods, _ = await api.list(kinds.PODS, namespace)
    for pod in pods:
        try:
            await api.delete(kinds.PODS, pod.metadata.name, namespace, grace_period_seconds=0)
        except NotFound:
            pass
    for name in nodes:
        try:
            await api.delete(kinds.NODES, name)
        except NotFound:
            pass


async def get_pod(api: ApiClient, namespace: str, name: str) -> Pod:
    pod: Pod = await api.get(kinds.PODS, name, namespace)
    return pod


async def events_for(api: ApiClient, namespace: str, name: str, reason: str) -> list[Event]:
    events, _ = await api.list(kinds.EVENTS, namespace)
    return [e for e in events if e.to_dict().get("involvedObject", {}).get("name") == name
            and e.to_dict().get("reason") == reason]


async def bound_node(api: ApiClient, namespace: str, name: str) -> str | None:
    return (await get_pod(api, namespace, name)).node_name or None


async def scheduled_false(api: ApiClient, namespace: str, name: str) -> tuple[str, str] | None:
    """(reason, message) of the pod's PodScheduled=False condition, once the scheduler wrote one."""
    cond = (await get_pod(api, namespace, name)).condition("PodScheduled")
    if cond is None or cond.status != "False":
        return None
    return cond.reason or "", cond.message or ""


@asynccontextmanager
async def running_scheduler(server: str, name: str, **options: Any) -> AsyncIterator[Scheduler]:
    """A Scheduler (its own ApiClient) running in this event loop; cancelled and closed on exit."""
    api = ApiClient(server, user_agent="kubelab-scheduler-test")
    scheduler = Scheduler(api, name=name, **options)
    task = asyncio.get_running_loop().create_task(scheduler.run(), name="test-scheduler")
    try:
        await wait_for(lambda: _synced(scheduler, task), "the scheduler's informers to sync")
        yield scheduler
    finally:
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001, S110 - already failing or cancelled
            pass
        await api.close()


async def _synced(scheduler: Scheduler, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()  # raises what killed it
    return scheduler.pods.has_synced() and scheduler.nodes.has_synced()
