"""A burst: 200 pods created at once onto 3 small nodes. The scheduler assumes each pod on its node the
moment it decides (§4), so no node is ever over-committed even though the bindings reach the watch
much later than the next decisions are made; the pods beyond capacity stay Pending, each told why."""

from __future__ import annotations

import asyncio

from schedulerkit import (
    cleanup,
    create_namespace,
    fresh_nodes,
    node_body,
    pod_body,
    running_scheduler,
    unique,
    wait_for,
)

from kubelab import kinds, quantity
from kubelab.client import ApiClient
from scheduler.scheduling import Scheduler

PODS = 200
NODES = 3
CPU_PER_NODE = "1"      # room for 10 pods of 100m each: 30 in all
POD_CPU = "100m"


async def _settled(api: ApiClient, scheduler: Scheduler, namespace: str) -> list | None:  # type: ignore[type-arg]
    """Every pod either bound or told why not, with nothing left for the scheduler to do."""
    if any(scheduler.queue.counts()[k] for k in ("active", "backoff", "inFlight")) or scheduler._binding:
        return None
    if scheduler.reporter.pending():
        return None
    pods, _ = await api.list(kinds.PODS, namespace)
    done = [p for p in pods if p.node_name or (p.condition("PodScheduled") is not None
                                                and p.condition("PodScheduled").status == "False")]
    return pods if len(done) == PODS else None


async def test_burst_never_over_commits(apiserver: str) -> None:
    namespace, name = unique("burst"), unique("burst-scheduler")
    async with ApiClient(apiserver) as api:
        await fresh_nodes(api)
        await create_namespace(api, namespace)
        nodes = [unique("small") for _ in range(NODES)]
        try:
            for node in nodes:
                await api.create(kinds.NODES, node_body(node, cpu=CPU_PER_NODE, memory="64Gi"))
            async with running_scheduler(apiserver, name) as scheduler:
                await asyncio.gather(*(api.create(kinds.PODS, pod_body(f"p{i:03}", name, cpu=POD_CPU), namespace)
                                       for i in range(PODS)))
                pods = await wait_for(lambda: _settled(api, scheduler, namespace), "every pod bound or rejected",
                                      timeout=120)
            bound = [p for p in pods if p.node_name]
            pending = [p for p in pods if not p.node_name]
            assert len(bound) == 30 and len(pending) == 170
            all_nodes, _ = await api.list(kinds.NODES)
            for node in (n for n in all_nodes if n.metadata.name in nodes):
                allocatable = quantity.milli_value(node.status.allocatable["cpu"])
                requested = sum(quantity.milli_value(POD_CPU) for p in bound if p.node_name == node.metadata.name)
                assert requested == allocatable, f"{node.metadata.name}: {requested}m of {allocatable}m"
            for p in pending:
                cond = p.condition("PodScheduled")
                assert (cond.reason, cond.message) == ("Unschedulable",
                                                       "0/3 nodes are available: 3 Insufficient cpu.")
        finally:
            await cleanup(api, namespace, nodes)
