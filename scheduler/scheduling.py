"""The scheduling loop: pop a pending pod, filter and score every node, assume, bind.

One decision at a time, like kube-scheduler's scheduleOne; the binding itself runs in the background
so the next decision does not wait for the API server. Pods that fit nowhere get kube-scheduler's
FailedScheduling event and PodScheduled=False condition and wait until a node or pod change could
make room, or their backoff (1 s doubling to 10 s) runs out.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError, Informer, WorkQueue
from kubelab.events import EventRecorder
from kubelab.models import Node, Pod

from . import score
from .cache import Cache, NodeInfo
from .fit import failure_message, fits
from .resources import pod_nonzero_requests, pod_requests

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"


@dataclass(frozen=True)
class Decision:
    node: str | None
    reasons: dict[str, list[str]]
    scores: dict[str, int]
    message: str = ""


def decide(pod: Pod, nodes: list[NodeInfo], *, strategy: str = "LeastAllocated",
           rng: random.Random | None = None) -> Decision:
    """Filter every node, score the feasible ones, pick the best (ties at random). Pure but for `rng`."""
    request = pod_requests(pod)
    nonzero = pod_nonzero_requests(pod)
    reasons: dict[str, list[str]] = {}
    feasible: list[NodeInfo] = []
    for info in nodes:
        why = fits(pod, info, request=request)
        if why:
            reasons[info.name] = why
        else:
            feasible.append(info)
    if not feasible:
        return Decision(None, reasons, {}, failure_message(len(nodes), reasons))
    if len(feasible) == 1:
        return Decision(feasible[0].name, reasons, {feasible[0].name: 0})
    fit_score = score.most_allocated if strategy == "MostAllocated" else score.least_allocated
    scores = {info.name: fit_score(nonzero, info) + score.balanced_allocation(request, info) for info in feasible}
    best = max(scores.values())
    winners = [name for name, s in scores.items() if s == best]
    return Decision((rng or random).choice(winners), reasons, scores)


class Scheduler:
    def __init__(self, api: ApiClient, *, name: str = SCHEDULER_NAME, strategy: str = "LeastAllocated",
                 seed: int | None = None) -> None:
        self.api = api
        self.name = name
        self.strategy = strategy
        self.rng = random.Random(seed)
        self.cache = Cache()
        self.pods: Informer[Pod] = Informer(api, kinds.PODS, name="scheduler-pods",
                                            field_selector="status.phase!=Succeeded,status.phase!=Failed")
        self.nodes: Informer[Node] = Informer(api, kinds.NODES, name="scheduler-nodes")
        self.queue = WorkQueue("scheduler", base_delay=1.0, max_delay=10.0)
        self.unschedulable: set[str] = set()
        self.events = EventRecorder(api, name)
        self._binding: set[asyncio.Task[None]] = set()
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)

    # --- event handlers: update the cache, enqueue keys ------------------------------------------

    def _is_pending(self, pod: Pod) -> bool:
        return (not pod.node_name and not pod.metadata.deletion_timestamp and not pod.is_terminal()
                and (pod.spec.scheduler_name if pod.spec else None) in (None, self.name))

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        if new is None:
            assert old is not None
            self.cache.remove_pod(old.key)
            self.unschedulable.discard(old.key)
            self._retry_unschedulable()  # an assigned pod's removal may free room
            return
        self.cache.set_pod(new)
        if self._is_pending(new):
            self.queue.add(new.key)
        else:
            self.unschedulable.discard(new.key)
            if new.is_terminal():
                self._retry_unschedulable()

    def _on_node(self, event: str, old: Node | None, new: Node | None) -> None:
        if new is None:
            assert old is not None
            self.cache.remove_node(old.metadata.name or "")
            return
        self.cache.set_node(new)
        self._retry_unschedulable()

    def _retry_unschedulable(self) -> None:
        for key in list(self.unschedulable):
            self.queue.add(key)

    # --- the loop --------------------------------------------------------------------------------

    async def schedule(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or not self._is_pending(pod) or self.cache.is_assumed_or_bound(key):
            self.unschedulable.discard(key)
            return
        decision = decide(pod, list(self.cache.nodes.values()), strategy=self.strategy, rng=self.rng)
        if decision.node is None:
            self.unschedulable.add(key)
            await self._record_failure(pod, decision.message)
            self.queue.add_rate_limited(key)
            return
        self.unschedulable.discard(key)
        self.queue.forget(key)
        self.cache.assume(pod, decision.node)
        task = asyncio.get_running_loop().create_task(self._bind(pod, decision.node))
        self._binding.add(task)
        task.add_done_callback(self._binding.discard)

    async def _bind(self, pod: Pod, node: str) -> None:
        try:
            await self.api.bind(pod, node)
        except ApiError as exc:
            log.warning("scheduler: binding %s to %s failed: %s", pod.key, node, exc)
            self.cache.forget(pod.key)
            if exc.code != 404:
                self.events.event(pod, "Warning", "FailedScheduling", f"Binding rejected: {exc.message}",
                                  action="Scheduling")
                self.queue.add_rate_limited(pod.key)
            return
        except Exception as exc:  # noqa: BLE001 - a lost connection: forget and try again later
            log.warning("scheduler: binding %s to %s failed: %s", pod.key, node, exc)
            self.cache.forget(pod.key)
            self.queue.add_rate_limited(pod.key)
            return
        log.info("scheduler: assigned %s to %s", pod.key, node)
        self.events.event(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}",
                          action="Binding")

    async def _record_failure(self, pod: Pod, message: str) -> None:
        log.info("scheduler: %s unschedulable: %s", pod.key, message)
        self.events.event(pod, "Warning", "FailedScheduling", message[:1024], action="Scheduling")
        current = pod.condition("PodScheduled")
        if current is not None and current.status == "False" and current.message == message:
            return
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastProbeTime": None,
                     "lastTransitionTime": current.last_transition_time if current is not None and
                     current.status == "False" else timeutil.rfc3339()}
        try:
            await self.api.patch(kinds.PODS, pod.metadata.name or "", {"status": {"conditions": [condition]}},
                                 pod.metadata.namespace, subresource="status",
                                 content_type="application/strategic-merge-patch+json")
        except ApiError as exc:
            log.debug("scheduler: could not update %s status: %s", pod.key, exc)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.nodes.run(), name="scheduler-nodes-informer")
            tg.create_task(self.pods.run(), name="scheduler-pods-informer")
            await self.nodes.wait_synced()
            await self.pods.wait_synced()
            log.info("scheduler: caches synced (%d nodes, %d pods)", len(self.nodes.cache), len(self.pods.cache))
            tg.create_task(self._worker(), name="scheduler-worker")

    async def _worker(self) -> None:
        # Not WorkQueue.run_worker: an unschedulable pod is not an error, yet its backoff must grow,
        # so schedule() decides itself when to forget a key's failures.
        while True:
            key = await self.queue.get()
            try:
                await self.schedule(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one broken pod must not stop scheduling
                log.exception("scheduler: scheduling %s failed", key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)


async def run(api: ApiClient, **kwargs: object) -> None:
    await Scheduler(api, **kwargs).run()  # type: ignore[arg-type]
