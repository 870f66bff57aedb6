"""The scheduler against the real API server (reference/scheduler-and-nodes.md §1, §3, §4, §6): a pod
that fits nowhere gets PodScheduled=False and a FailedScheduling event in kube-scheduler's words, is
parked, and is bound as soon as a cluster event makes room — a node added, a blocking pod deleted, a
taint removed; priorities order the queue; a failed binding forgets the assumption and retries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from schedulerkit import (
    bound_node,
    cleanup,
    create_namespace,
    events_for,
    fresh_nodes,
    get_pod,
    node_body,
    pod_body,
    running_scheduler,
    scheduled_false,
    unique,
    wait_for,
)

from kubelab import kinds
from kubelab.client import ApiClient, ApiError
from scheduler.scheduling import Scheduler

DB_TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


class Lab:
    """One test's namespace, node names and scheduler name, and the client to make them with."""

    def __init__(self, api: ApiClient, server: str) -> None:
        self.api = api
        self.server = server
        self.ns = unique("sched")
        self.scheduler = unique("test-scheduler")
        self.node_names: list[str] = []

    async def node(self, **kwargs: Any) -> str:
        name = unique("node")
        self.node_names.append(name)
        await self.api.create(kinds.NODES, node_body(name, **kwargs))
        return name

    async def pod(self, name: str, **kwargs: Any) -> str:
        await self.api.create(kinds.PODS, pod_body(name, self.scheduler, **kwargs), self.ns)
        return name


@pytest.fixture
async def lab(apiserver: str) -> AsyncIterator[Lab]:
    async with ApiClient(apiserver) as api:
        await fresh_nodes(api)
        lab = Lab(api, apiserver)
        await create_namespace(api, lab.ns)
        try:
            yield lab
        finally:
            await cleanup(api, lab.ns, lab.node_names)


async def test_unschedulable_pod_is_told_why_and_bound_when_a_node_is_added(lab: Lab) -> None:
    small = await lab.node(cpu="1")
    tainted = await lab.node(taints=[DB_TAINT])
    async with running_scheduler(lab.server, lab.scheduler):
        await lab.pod("web", cpu="2")
        message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: db}."
        assert await wait_for(lambda: scheduled_false(lab.api, lab.ns, "web"), "PodScheduled=False") == \
            ("Unschedulable", message)
        [event] = await wait_for(lambda: events_for(lab.api, lab.ns, "web", "FailedScheduling"), "the event")
        assert (event.to_dict()["type"], event.to_dict()["message"]) == ("Warning", message)
        assert event.to_dict()["reportingComponent"] == lab.scheduler
        assert await bound_node(lab.api, lab.ns, "web") is None

        big = await lab.node(cpu="4")
        assert await wait_for(lambda: bound_node(lab.api, lab.ns, "web"), "the binding") == big
        pod = await get_pod(lab.api, lab.ns, "web")
        cond = pod.condition("PodScheduled")
        assert cond is not None and cond.status == "True"
        [scheduled] = await wait_for(lambda: events_for(lab.api, lab.ns, "web", "Scheduled"), "Scheduled event")
        assert scheduled.to_dict()["message"] == f"Successfully assigned {lab.ns}/web to {big}"
        assert scheduled.to_dict()["type"] == "Normal"
    assert {small, tainted}.isdisjoint({pod.node_name})


async def test_deleting_a_blocking_pod_makes_room(lab: Lab) -> None:
    node = await lab.node(cpu="1")
    async with running_scheduler(lab.server, lab.scheduler):
        await lab.pod("blocker", cpu="800m")
        assert await wait_for(lambda: bound_node(lab.api, lab.ns, "blocker"), "blocker bound") == node
        await lab.pod("waiter", cpu="500m")
        assert await wait_for(lambda: scheduled_false(lab.api, lab.ns, "waiter"), "waiter rejected") == \
            ("Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")
        await lab.api.delete(kinds.PODS, "blocker", lab.ns, grace_period_seconds=0)
        assert await wait_for(lambda: bound_node(lab.api, lab.ns, "waiter"), "waiter bound") == node


async def test_removing_a_taint_lets_the_pod_in(lab: Lab) -> None:
    node = await lab.node(taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    async with running_scheduler(lab.server, lab.scheduler):
        await lab.pod("web")
        assert await wait_for(lambda: scheduled_false(lab.api, lab.ns, "web"), "rejection") == (
            "Unschedulable",
            "0/1 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.")
        await lab.api.patch(kinds.NODES, node, {"spec": {"taints": None}})
        assert await wait_for(lambda: bound_node(lab.api, lab.ns, "web"), "binding after untaint") == node


async def test_the_scheduler_reads_taints_not_conditions(lab: Lab) -> None:
    # §1.5: a node with Ready=False but no taint yet (the lifecycle controller has not acted) is a
    # candidate like any other; the not-ready taint is what keeps pods away.
    not_ready = await lab.node(ready="False")
    await lab.node(ready="False", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    async with running_scheduler(lab.server, lab.scheduler):
        for i in range(4):
            await lab.pod(f"p{i}")
        for i in range(4):
            assert await wait_for(lambda i=i: bound_node(lab.api, lab.ns, f"p{i}"), f"p{i} bound") == not_ready


async def test_a_heartbeat_does_not_retry_a_parked_pod(lab: Lab) -> None:
    node = await lab.node(cpu="1")
    async with running_scheduler(lab.server, lab.scheduler) as scheduler:
        await lab.pod("big", cpu="2")
        await wait_for(lambda: scheduled_false(lab.api, lab.ns, "big"), "rejection")
        await wait_for(lambda: _parked(scheduler, f"{lab.ns}/big"), "the pod parked")
        decisions = scheduler.decisions
        current = await lab.api.get(kinds.NODES, node)
        current.status.conditions[0].last_heartbeat_time = "2030-01-01T00:00:00Z"
        await lab.api.update_status(kinds.NODES, current)
        await wait_for(lambda: _node_seen(scheduler, node, "2030-01-01T00:00:00Z"), "the heartbeat seen")
        assert scheduler.queue.where(f"{lab.ns}/big") == "unschedulable"
        assert scheduler.decisions == decisions


async def _parked(scheduler: Scheduler, key: str) -> bool:
    return scheduler.queue.where(key) == "unschedulable"


async def _node_seen(scheduler: Scheduler, name: str, heartbeat: str) -> bool:
    info = scheduler.cache.nodes.get(name)
    return info is not None and info.node.condition("Ready").last_heartbeat_time == heartbeat  # type: ignore[union-attr]


async def test_higher_priority_pods_are_scheduled_first(lab: Lab) -> None:
    node = await lab.node(cpu="1")
    # Both wait in activeQ before the scheduler starts: priority decides, not creation order.
    await lab.pod("low", cpu="1", priority=0)
    await lab.pod("high", cpu="1", priority=1000)
    async with running_scheduler(lab.server, lab.scheduler):
        assert await wait_for(lambda: bound_node(lab.api, lab.ns, "high"), "high bound") == node
        assert await wait_for(lambda: scheduled_false(lab.api, lab.ns, "low"), "low rejected") == \
            ("Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")


async def test_a_failed_binding_is_forgotten_and_retried(lab: Lab) -> None:
    node = await lab.node(cpu="1")
    async with running_scheduler(lab.server, lab.scheduler) as scheduler:
        real_bind = scheduler.api.bind
        calls: list[str] = []

        async def flaky_bind(pod: Any, node_name: str) -> None:
            calls.append(node_name)
            if len(calls) == 1:
                raise ApiError(500, "InternalError", "etcd went away")
            await real_bind(pod, node_name)

        scheduler.api.bind = flaky_bind  # type: ignore[method-assign]
        await lab.pod("web", cpu="1")
        reason, message = await wait_for(lambda: scheduled_false(lab.api, lab.ns, "web"), "SchedulerError")
        assert (reason, message) == ("SchedulerError", 'running Bind plugin "DefaultBinder": etcd went away')
        assert await wait_for(lambda: bound_node(lab.api, lab.ns, "web"), "bound on retry") == node
        assert calls == [node, node]
        # The first attempt's assumption was forgotten: the node holds the pod once, not twice.
        assert scheduler.cache.nodes[node].requested.milli_cpu == 1000


async def test_the_condition_is_not_patched_again_when_nothing_changed(lab: Lab) -> None:
    await lab.node(cpu="1")
    async with running_scheduler(lab.server, lab.scheduler) as scheduler:
        await lab.pod("big", cpu="2")
        await wait_for(lambda: scheduled_false(lab.api, lab.ns, "big"), "rejection")
        await wait_for(lambda: _parked(scheduler, f"{lab.ns}/big"), "the pod parked")
        # A label change is an update of the pod itself: it is tried again (after its backoff) ...
        await lab.api.patch(kinds.PODS, "big", {"metadata": {"labels": {"try": "again"}}}, lab.ns)
        labelled = (await get_pod(lab.api, lab.ns, "big")).metadata.resource_version
        await wait_for(lambda: _events_counted(lab, "big", 2), "a second FailedScheduling")
        await wait_for(lambda: _parked(scheduler, f"{lab.ns}/big"), "the pod parked again")
        # ... fails with the same words, and the status is left alone: same resourceVersion.
        assert (await get_pod(lab.api, lab.ns, "big")).metadata.resource_version == labelled


async def _events_counted(lab: Lab, name: str, count: int) -> bool:
    events = await events_for(lab.api, lab.ns, name, "FailedScheduling")
    # The scheduler writes events.k8s.io/v1 events: a repeat is a series (its count), not core/v1's count.
    return sum((e.to_dict().get("series") or {}).get("count") or e.to_dict().get("count", 1) for e in events) >= count
