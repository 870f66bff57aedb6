"""kube-scheduler's scheduling queue: activeQ, backoffQ and unschedulablePods (`backend/queue/
scheduling_queue.go`), driven by a clock the caller gives, so tests can move time by hand.

- activeQ pops the highest `spec.priority` first, then the pod that entered the queue earliest
  (PrioritySort).
- A pod that fits nowhere is parked in unschedulablePods with the plugins that rejected it. It comes
  back only on a cluster event one of those plugins registered for (a node added, a taint removed,
  an assigned pod deleted, ...) and that the caller's hint says may help, or when the pod itself is
  updated, or after 5 minutes in any case.
- Coming back, a pod still inside its backoff (1 s doubling to 10 s per attempt, from its last
  failure) waits in backoffQ; a pod past it goes straight to activeQ.
- If such an event arrives while the pod is being scheduled ("in flight"), the failed attempt goes
  to backoffQ instead of being parked, so the event is not lost (moveRequestCycle).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubelab.models import Pod

from .fit import (
    NODE_AFFINITY_PLUGIN,
    NODE_NAME_PLUGIN,
    NODE_PORTS_PLUGIN,
    NODE_RESOURCES_FIT_PLUGIN,
    NODE_UNSCHEDULABLE_PLUGIN,
    TAINT_TOLERATION_PLUGIN,
)

# Cluster events (framework.ClusterEvent), named after kube-scheduler's event labels.
NODE_ADD = "NodeAdd"
NODE_ALLOCATABLE_INCREASE = "NodeAllocatableChange"
NODE_LABEL_CHANGE = "NodeLabelChange"
NODE_TAINT_CHANGE = "NodeTaintChange"
NODE_SCHEDULABLE = "NodeSpecUnschedulableChange"
ASSIGNED_POD_DELETE = "AssignedPodDelete"

# EventsToRegister of each filter plugin: which events can turn its rejection into an acceptance.
INTERESTED: dict[str, frozenset[str]] = {
    NODE_ADD: frozenset({NODE_UNSCHEDULABLE_PLUGIN, NODE_NAME_PLUGIN, TAINT_TOLERATION_PLUGIN,
                         NODE_AFFINITY_PLUGIN, NODE_PORTS_PLUGIN, NODE_RESOURCES_FIT_PLUGIN}),
    NODE_ALLOCATABLE_INCREASE: frozenset({NODE_RESOURCES_FIT_PLUGIN}),
    NODE_LABEL_CHANGE: frozenset({NODE_AFFINITY_PLUGIN}),
    NODE_TAINT_CHANGE: frozenset({TAINT_TOLERATION_PLUGIN, NODE_UNSCHEDULABLE_PLUGIN}),
    NODE_SCHEDULABLE: frozenset({NODE_UNSCHEDULABLE_PLUGIN}),
    ASSIGNED_POD_DELETE: frozenset({NODE_RESOURCES_FIT_PLUGIN, NODE_PORTS_PLUGIN}),
}

Hint = Callable[[Pod], bool]


def scheduling_gates(pod: Pod) -> list[Any]:
    extra = pod.spec.model_extra if pod.spec is not None else None
    return list((extra or {}).get("schedulingGates") or [])


def is_pod_updated(old: Pod, new: Pod) -> bool:
    """isPodUpdated: a change other than status, resourceVersion, generation, managedFields or
    finalizers. The scheduler's own PodScheduled patch must not count, or a pod would retry forever."""
    def strip(pod: Pod) -> dict[str, Any]:
        data = pod.to_dict()
        data.pop("status", None)
        meta = data.get("metadata") or {}
        for key in ("resourceVersion", "generation", "managedFields", "finalizers"):
            meta.pop(key, None)
        return data
    return strip(old) != strip(new)


@dataclass(eq=False)
class QueuedPod:
    pod: Pod
    timestamp: float                     # when it last entered the queue: sort key and backoff base
    attempts: int = 0
    unschedulable_plugins: frozenset[str] = frozenset()
    gated: bool = False
    cycle: int = 0                       # the scheduling cycle of its latest attempt
    updated_in_flight: bool = False

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def priority(self) -> int:
        return (self.pod.spec.priority if self.pod.spec else None) or 0


class SchedulingQueue:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic, initial_backoff: float = 1.0,
                 max_backoff: float = 10.0, max_unschedulable: float = 300.0) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        self._infos: dict[str, QueuedPod] = {}   # every pod the queue knows, wherever it is
        self._active: list[tuple[int, float, int, str]] = []
        self._active_seq: dict[str, int] = {}
        self._backoff: list[tuple[float, int, str]] = []
        self._backoff_seq: dict[str, int] = {}
        self._unschedulable: dict[str, QueuedPod] = {}
        self._in_flight: dict[str, QueuedPod] = {}
        self._seq = itertools.count()
        self._wakeup: asyncio.Event | None = None

    # --- where pods are ----------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {"active": len(self._active_seq), "backoff": len(self._backoff_seq),
                "unschedulable": len(self._unschedulable), "inFlight": len(self._in_flight)}

    def where(self, key: str) -> str | None:
        for name, place in (("active", self._active_seq), ("backoff", self._backoff_seq),
                            ("unschedulable", self._unschedulable), ("inFlight", self._in_flight)):
            if key in place:
                return name
        return None

    def backoff_duration(self, attempts: int) -> float:
        """1 s, 2 s, 4 s, 8 s, then 10 s: initial × 2^(attempts − 1), capped; no attempt, no backoff."""
        if attempts == 0:
            return 0.0
        return min(self.initial_backoff * 2.0 ** (attempts - 1), self.max_backoff)

    def backoff_expiry(self, qp: QueuedPod) -> float:
        return qp.timestamp + self.backoff_duration(qp.attempts)

    def _push_active(self, qp: QueuedPod) -> None:
        seq = next(self._seq)
        self._active_seq[qp.key] = seq
        self._backoff_seq.pop(qp.key, None)
        heapq.heappush(self._active, (-qp.priority, qp.timestamp, seq, qp.key))
        if self._wakeup is not None:
            self._wakeup.set()

    def _push_backoff(self, qp: QueuedPod) -> None:
        seq = next(self._seq)
        self._backoff_seq[qp.key] = seq
        heapq.heappush(self._backoff, (self.backoff_expiry(qp), seq, qp.key))

    def _requeue(self, qp: QueuedPod) -> None:
        """movePodsToActiveOrBackoffQueue for one pod: backoffQ while still backing off, else activeQ."""
        self._unschedulable.pop(qp.key, None)
        if self.backoff_expiry(qp) > self.clock():
            self._push_backoff(qp)
        else:
            self._push_active(qp)

    def _forget(self, key: str) -> QueuedPod | None:
        self._active_seq.pop(key, None)
        self._backoff_seq.pop(key, None)
        self._unschedulable.pop(key, None)
        self._in_flight.pop(key, None)
        return self._infos.pop(key, None)

    # --- the informer's side -----------------------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A pending pod appeared. A gated pod (spec.schedulingGates) is parked until its gates go."""
        qp = self._infos.get(pod.key)
        if qp is not None:
            qp.pod = pod
            return
        qp = QueuedPod(pod, self.clock())
        self._infos[pod.key] = qp
        if scheduling_gates(pod):
            qp.gated = True
            self._unschedulable[pod.key] = qp
        else:
            self._push_active(qp)

    def update(self, old: Pod | None, new: Pod) -> None:
        key = new.key
        qp = self._infos.get(key)
        if qp is None:
            self.add(new)
            return
        updated = old is None or is_pod_updated(old, new)
        qp.pod = new
        if key in self._in_flight:
            qp.updated_in_flight = qp.updated_in_flight or updated
        elif key in self._unschedulable:
            if qp.gated:
                if not scheduling_gates(new):
                    qp.gated = False
                    self._unschedulable.pop(key)
                    self._push_active(qp)
            elif updated:
                self._requeue(qp)

    def delete(self, key: str) -> None:
        self._forget(key)

    # --- the scheduler's side ----------------------------------------------------------------------

    def pop_nowait(self) -> QueuedPod | None:
        while self._active:
            _, _, seq, key = heapq.heappop(self._active)
            if self._active_seq.get(key) != seq:
                continue  # a stale heap entry: the pod moved or went away since
            del self._active_seq[key]
            qp = self._infos[key]
            self.scheduling_cycle += 1
            qp.attempts += 1
            qp.cycle = self.scheduling_cycle
            qp.updated_in_flight = False
            self._in_flight[key] = qp
            return qp
        return None

    async def pop(self) -> QueuedPod:
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        while True:
            qp = self.pop_nowait()
            if qp is not None:
                return qp
            self._wakeup.clear()
            await self._wakeup.wait()

    def done(self, key: str) -> None:
        """The pod was assumed on a node: the queue is finished with it."""
        self._forget(key)

    def add_unschedulable(self, qp: QueuedPod, plugins: frozenset[str]) -> None:
        """AddUnschedulableIfNotPresent after a failed attempt. Rejected by plugins: parked, unless an
        event or an update came during the attempt. No rejecting plugin (an error): backoffQ."""
        key = qp.key
        if self._in_flight.pop(key, None) is None:
            return  # deleted (or assigned) while it was being scheduled
        qp.timestamp = self.clock()
        qp.unschedulable_plugins = plugins
        if not plugins or qp.updated_in_flight or self.move_request_cycle >= qp.cycle:
            self._requeue(qp)
        else:
            self._unschedulable[key] = qp

    def add_after_error(self, qp: QueuedPod) -> None:
        """A pod the queue had let go (assumed) failed later, in binding: back through backoffQ."""
        if qp.key in self._infos:
            return  # an update already brought it back
        self._infos[qp.key] = qp
        qp.timestamp = self.clock()
        qp.unschedulable_plugins = frozenset()
        self._requeue(qp)

    def move(self, events: Iterable[str], hint: Hint | None = None) -> int:
        """MoveAllToActiveOrBackoffQueue: parked pods rejected by a plugin interested in one of
        `events`, and for which `hint(pod)` holds, go back to backoffQ or activeQ."""
        interested = frozenset().union(*(INTERESTED.get(e, frozenset()) for e in events))
        moved = 0
        for qp in list(self._unschedulable.values()):
            if qp.gated or (qp.unschedulable_plugins and not qp.unschedulable_plugins & interested):
                continue
            if hint is not None and not hint(qp.pod):
                continue
            self._requeue(qp)
            moved += 1
        self.move_request_cycle = self.scheduling_cycle
        return moved

    # --- time ---------------------------------------------------------------------------------------

    def flush_backoff_completed(self) -> int:
        """flushBackoffQCompleted: pods whose backoff ran out go to activeQ."""
        now, moved = self.clock(), 0
        while self._backoff:
            expiry, seq, key = self._backoff[0]
            if self._backoff_seq.get(key) != seq:
                heapq.heappop(self._backoff)
                continue
            if expiry > now:
                break
            heapq.heappop(self._backoff)
            self._push_active(self._infos[key])
            moved += 1
        return moved

    def next_backoff_expiry(self) -> float | None:
        while self._backoff and self._backoff_seq.get(self._backoff[0][2]) != self._backoff[0][1]:
            heapq.heappop(self._backoff)
        return self._backoff[0][0] if self._backoff else None

    def flush_unschedulable_leftover(self) -> int:
        """flushUnschedulablePodsLeftover: nothing helped a parked pod for 5 minutes; try it again."""
        now = self.clock()
        stale = [qp for qp in self._unschedulable.values()
                 if not qp.gated and now - qp.timestamp > self.max_unschedulable]
        for qp in stale:
            self._requeue(qp)
        if stale:
            self.move_request_cycle = self.scheduling_cycle
        return len(stale)

    async def run(self, *, backoff_period: float = 1.0, leftover_period: float = 30.0) -> None:
        """The queue's background loops: backoffQ is flushed every second (sooner when a backoff ends
        before that), unschedulablePods every 30 s."""
        next_leftover = time.monotonic() + leftover_period
        while True:
            self.flush_backoff_completed()
            if time.monotonic() >= next_leftover:
                self.flush_unschedulable_leftover()
                next_leftover = time.monotonic() + leftover_period
            expiry = self.next_backoff_expiry()
            delay = backoff_period if expiry is None else min(backoff_period, max(0.0, expiry - self.clock()))
            await asyncio.sleep(max(delay, 0.01))
