"""The scheduling loop: pop a pending pod, decide, assume, bind — kube-scheduler's scheduleOne.

Informer handlers keep the node cache and the scheduling queue up to date and turn cluster changes
into queue moves (a node added, a taint removed, an assigned pod deleted). One decision runs at a
time and never awaits: the decision and the assumption it leads to are atomic with respect to
informer events. Bindings run in the background, each in a task of its own as kube-scheduler runs each
binding cycle in a goroutine, at most `bind_in_flight` at once (kube-scheduler's are paced by its client's
rate limit; 32 here halved a 50 x 20 rollout's pod startup p99 against 16, bench/density.py, while 100 left
the FailedScheduling events of a burst queued behind the bindings at the API server, bench/up.py), so the
next decision does not wait for the API server; events and status patches are posted by
`reporting.Reporter`, off the decision path too.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from kubelab import kinds
from kubelab.client import ApiClient, ApiError, Informer
from kubelab.models import Node, Pod

from . import queue as q
from .algorithm import decide
from .cache import Cache, NodeInfo
from .decision import Decision
from .fit import PodContext, filter_node, truncate_note
from .metrics import ERROR, SCHEDULED, UNSCHEDULABLE, SchedulerMetrics
from .reporting import Reporter
from .resources import node_allocatable
from .score import LEAST_ALLOCATED, STRATEGIES

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"
BIND_IN_FLIGHT = 32
DECIDE_FOR = 0.01  # seconds of decisions between two turns of the event loop

__all__ = ["SCHEDULER_NAME", "Decision", "Scheduler", "decide", "node_change_events", "run"]


def node_change_events(old: Node, new: Node) -> set[str]:
    """nodeSchedulingPropertiesChange: which of a node update's changes could help a parked pod.
    A heartbeat (conditions, annotations) changes nothing the filters read, so it moves nobody."""
    events = set()
    if old.spec and old.spec.unschedulable and not (new.spec and new.spec.unschedulable):
        events.add(q.NODE_SCHEDULABLE)
    before, after = node_allocatable(old), node_allocatable(new)
    if (after.milli_cpu > before.milli_cpu or after.memory > before.memory or after.pods > before.pods
            or after.ephemeral_storage > before.ephemeral_storage
            or any(v > before.scalar.get(k, 0) for k, v in after.scalar.items())):
        events.add(q.NODE_ALLOCATABLE_INCREASE)
    if (old.metadata.labels or {}) != (new.metadata.labels or {}):
        events.add(q.NODE_LABEL_CHANGE)
    if [t.to_dict() for t in (old.spec.taints if old.spec else None) or []] != \
            [t.to_dict() for t in (new.spec.taints if new.spec else None) or []]:
        events.add(q.NODE_TAINT_CHANGE)
    return events


def fits_now(info: NodeInfo) -> Callable[[Pod], bool]:
    """The queueing hint for an event about one node: would the pod pass every filter there now?"""
    return lambda pod: filter_node(PodContext(pod), info) is None


class Scheduler:
    def __init__(self, api: ApiClient, *, name: str = SCHEDULER_NAME, strategy: str = LEAST_ALLOCATED,
                 seed: int | None = None, percentage_of_nodes_to_score: int = 0,
                 bind_in_flight: int = BIND_IN_FLIGHT, clock: Callable[[], float] = time.monotonic) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown scoring strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
        self.api = api
        self.name = name
        self.strategy = strategy
        self.percentage = percentage_of_nodes_to_score
        self.rng = random.Random(seed)
        self.cache = Cache()
        self.queue = q.SchedulingQueue(clock=clock)
        self.pods: Informer[Pod] = Informer(api, kinds.PODS, name="scheduler-pods",
                                            field_selector="status.phase!=Succeeded,status.phase!=Failed")
        self.nodes: Informer[Node] = Informer(api, kinds.NODES, name="scheduler-nodes")
        self.reporter = Reporter(api, name)
        self._bind_slots = asyncio.Semaphore(bind_in_flight)
        self._binding: set[asyncio.Task[None]] = set()
        self._next_start = 0
        self.decisions = 0
        self.bound = 0
        self.metrics = SchedulerMetrics()
        self.metrics.track_queue(self.queue.counts)
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)

    # --- informer handlers: cache first, then the queue ------------------------------------------

    def _responsible(self, pod: Pod) -> bool:
        return (pod.spec.scheduler_name if pod.spec else None) in (None, "", self.name)

    def _on_pod(self, event: str, old: Pod | None, new: Pod | None) -> None:
        if new is None:  # deleted, or terminal (it left the informer's field selector)
            assert old is not None
            node = self.cache.node_of(old.key)
            self.cache.remove_pod(old.key)
            self.queue.delete(old.key)
            info = self.cache.nodes.get(node) if node else None
            if info is not None:
                self.queue.move([q.ASSIGNED_POD_DELETE], fits_now(info))
            return
        if new.node_name or new.is_terminal() or not self._responsible(new):
            self.cache.set_pod(new)
            self.queue.delete(new.key)
            return
        if self.cache.is_assumed(new.key):
            return  # our binding is on its way; this is an older version of the pod
        if old is None:
            self.queue.add(new)
        else:
            self.queue.update(old, new)

    def _on_node(self, event: str, old: Node | None, new: Node | None) -> None:
        if new is None:
            assert old is not None
            self.cache.remove_node(old.metadata.name or "")
            return
        self.cache.set_node(new)
        info = self.cache.nodes[new.metadata.name or ""]
        events = {q.NODE_ADD} if old is None else node_change_events(old, new)
        if events:
            self.queue.move(events, fits_now(info))

    # --- one scheduling cycle ---------------------------------------------------------------------

    def schedule_one(self, qp: q.QueuedPod) -> Decision | None:
        """Decide for one popped pod, assume it and start its binding. Never awaits."""
        key = qp.key
        pod = self.pods.get(key)
        if pod is None or pod.node_name or not self._responsible(pod) or self.cache.is_assumed_or_bound(key):
            self.queue.done(key)
            return None
        if pod.metadata.deletion_timestamp:  # skipPodSchedule
            self.queue.done(key)
            self.reporter.event(pod, "Warning", "FailedScheduling", f"skip schedule deleting pod: {key}",
                                "Scheduling")
            return None
        qp.pod = pod
        started = time.perf_counter()
        decision = decide(pod, self.cache.node_list(), strategy=self.strategy, rng=self.rng,
                          percentage=self.percentage, start=self._next_start, arrays=self.cache.node_arrays())
        self._next_start = decision.next_start
        self.decisions += 1
        if decision.node is None:
            self.metrics.observe(UNSCHEDULABLE, self.name, time.perf_counter() - started)
            self.queue.add_unschedulable(qp, decision.unschedulable_plugins)
            self._report_failure(pod, "Unschedulable", decision.message)
            return decision
        ctx = decision.context
        self.cache.assume(pod, decision.node, requests=ctx.request if ctx else None, nonzero=ctx.nonzero if ctx else None)
        self.queue.done(key)
        task = asyncio.get_running_loop().create_task(self._bind(qp, pod, decision.node, started))
        self._binding.add(task)
        task.add_done_callback(self._binding.discard)
        return decision

    def _report_failure(self, pod: Pod, reason: str, message: str) -> None:
        log.info("%s not scheduled: %s", pod.key, message)
        self.reporter.event(pod, "Warning", "FailedScheduling", truncate_note(message), "Scheduling")
        self.reporter.pod_scheduled_false(pod, reason, message)

    async def _bind(self, qp: q.QueuedPod, pod: Pod, node: str, started: float | None = None) -> None:
        try:
            async with self._bind_slots:
                await self.api.bind(pod, node)
        except Exception as exc:  # noqa: BLE001 - any failure: forget the assumption, retry later
            if started is not None:
                self.metrics.observe(ERROR, self.name, time.perf_counter() - started)
            self._binding_failed(qp, pod, node, exc)
            return
        if started is not None:
            self.metrics.observe(SCHEDULED, self.name, time.perf_counter() - started)
        self.bound += 1
        log.debug("assigned %s to %s", pod.key, node)
        self.reporter.event(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}", "Binding")

    def _binding_failed(self, qp: q.QueuedPod, pod: Pod, node: str, exc: Exception) -> None:
        """handleBindingCycleError: ForgetPod, let other parked pods try the room it held, and send
        the pod back through backoffQ with reason SchedulerError."""
        log.warning("binding %s to %s failed: %s", pod.key, node, exc)
        self.cache.forget(pod.key)
        info = self.cache.nodes.get(node)
        if info is not None:
            self.queue.move([q.ASSIGNED_POD_DELETE], fits_now(info))
        current = self.pods.get(pod.key)
        if current is not None and not current.node_name:
            self.queue.add_after_error(qp)
        detail = exc.message if isinstance(exc, ApiError) else (str(exc) or type(exc).__name__)
        self._report_failure(current or pod, "SchedulerError", f'running Bind plugin "DefaultBinder": {detail}')

    # --- running ----------------------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.nodes.run(), name="scheduler-nodes-informer")
            tg.create_task(self.pods.run(), name="scheduler-pods-informer")
            tg.create_task(self.reporter.run(), name="scheduler-reporter")
            await self.nodes.wait_synced()
            await self.pods.wait_synced()
            log.info("caches synced (%d nodes, %d pods)", len(self.nodes.cache), len(self.pods.cache))
            tg.create_task(self.queue.run(), name="scheduler-queue")
            tg.create_task(self._loop(), name="scheduler-loop")

    async def _loop(self) -> None:
        while True:
            qp: q.QueuedPod | None = await self.queue.pop()
            # Decide for the queued pods one after another, as kube-scheduler's own goroutine does, for up to
            # DECIDE_FOR seconds, then let informers and bindings run. Yielding after every decision cost
            # a whole turn of the event loop per pod: on a `kubelab up` whose loop also runs every node,
            # a turn took up to 0.3 s in a rollout, and pods waited seconds in the queue (density 20 x 10).
            until = time.perf_counter() + DECIDE_FOR
            while qp is not None:
                try:
                    self.schedule_one(qp)
                except Exception:
                    log.exception("scheduling %s failed", qp.key)
                    self.queue.add_unschedulable(qp, frozenset())
                qp = self.queue.pop_nowait() if time.perf_counter() < until else None
            await asyncio.sleep(0)


async def run(api: ApiClient, **kwargs: object) -> None:
    await Scheduler(api, **kwargs).run()  # type: ignore[arg-type]
