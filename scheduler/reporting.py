"""What the scheduler tells the API server besides bindings: events and the PodScheduled condition.

Neither may hold up a decision. Events are events.k8s.io/v1, with series for repeats (kubelab/eventseries.py,
as kube-scheduler writes them); they go through a bounded queue (1000 queued events at most; further
ones are dropped, never waited for), posted by a few workers at once: client-go's events broadcaster
(tools/events, which kube-scheduler uses) writes each event from a goroutine of its own, so a
FailedScheduling event does not wait for every Scheduled event of a burst before it, one at a time.
Nor does it wait behind them in the queue: Warning events are taken before Normal ones (with goroutines
there is no order to keep, and during a burst of 2,000 bindings the Scheduled events queued ahead of a
FailedScheduling one held it back 3.9-6.5 s, bench/up.py). PodScheduled=False patches are coalesced per pod
— only the latest wish is sent — and written by a couple of background workers; a patch that would change
nothing is never sent (schedule_one.go updatePod).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from kubelab import kinds, timeutil
from kubelab.client import ApiClient, ApiError
from kubelab.eventseries import SeriesRecorder
from kubelab.models import Pod

log = logging.getLogger(__name__)

MAX_QUEUED_EVENTS = 1000   # client-go tools/events maxQueuedEvents
STATUS_WORKERS = 2
EVENT_WORKERS = 8


@dataclass(frozen=True)
class _Event:
    pod: Pod
    type: str
    reason: str
    message: str
    action: str


def condition_unchanged(pod: Pod, reason: str, message: str) -> bool:
    """podutil.UpdatePodCondition found nothing to change: same status, reason and message."""
    current = pod.condition("PodScheduled")
    return (current is not None and current.status == "False" and current.reason == reason
            and current.message == message)


def scheduled_false(pod: Pod, reason: str, message: str) -> dict[str, object]:
    """The condition to patch: lastTransitionTime moves only when the status changes."""
    current = pod.condition("PodScheduled")
    since = current.last_transition_time if current is not None and current.status == "False" else None
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": since or timeutil.rfc3339()}


class Reporter:
    def __init__(self, api: ApiClient, component: str) -> None:
        self.api = api
        # events.k8s.io/v1 with series, as kube-scheduler records through client-go's tools/events.
        self.recorder = SeriesRecorder(api, component)
        self._warnings: deque[_Event] = deque()
        self._normal: deque[_Event] = deque()
        self._events_ready = asyncio.Event()
        self.dropped_events = 0
        self._conditions: dict[str, tuple[Pod, dict[str, object]]] = {}
        self._conditions_ready = asyncio.Event()

    # --- called from the scheduling loop: never blocks ------------------------------------------

    def event(self, pod: Pod, event_type: str, reason: str, message: str, action: str) -> None:
        """Queue an event for the workers. At most MAX_QUEUED_EVENTS wait; past that one is dropped, as
        client-go's broadcaster drops when its channel is full. A Warning takes the place of the oldest
        Normal event rather than being dropped behind them: in a 5,000-node burst the Scheduled events of
        the bindings filled the queue, and a pod's FailedScheduling event was lost until its retry five
        minutes later (client-go hands each event to a goroutine of its own, so its queue never fills
        that way)."""
        warning = event_type != "Normal"
        if len(self._warnings) + len(self._normal) >= MAX_QUEUED_EVENTS:
            self.dropped_events += 1  # DropIfChannelFull
            if not (warning and self._normal):
                return
            self._normal.popleft()
        queued = self._warnings if warning else self._normal
        queued.append(_Event(pod, event_type, reason, message, action))
        self._events_ready.set()

    def pod_scheduled_false(self, pod: Pod, reason: str, message: str) -> None:
        if condition_unchanged(pod, reason, message):
            return
        self._conditions[pod.key] = (pod, scheduled_false(pod, reason, message))
        self._conditions_ready.set()

    def pending(self) -> int:
        return len(self._warnings) + len(self._normal) + len(self._conditions)

    # --- background workers ------------------------------------------------------------------------

    async def _post_events(self) -> None:
        while True:
            while not (self._warnings or self._normal):
                self._events_ready.clear()
                await self._events_ready.wait()
            e = (self._warnings or self._normal).popleft()
            await self.recorder.post(e.pod, e.type, e.reason, e.message, action=e.action)

    async def _patch_conditions(self) -> None:
        while True:
            while not self._conditions:
                self._conditions_ready.clear()
                await self._conditions_ready.wait()
            key = next(iter(self._conditions))
            pod, condition = self._conditions.pop(key)
            try:
                await self.api.patch(kinds.PODS, pod.metadata.name or "", {"status": {"conditions": [condition]}},
                                     pod.metadata.namespace, subresource="status",
                                     content_type="application/strategic-merge-patch+json")
            except ApiError as exc:
                log.debug("could not update %s status: %s", key, exc)
            except Exception as exc:  # noqa: BLE001 - a lost connection: the next failure patches again
                log.warning("could not update %s status: %s", key, exc)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for i in range(EVENT_WORKERS):
                tg.create_task(self._post_events(), name=f"scheduler-events-{i}")
            for i in range(STATUS_WORKERS):
                tg.create_task(self._patch_conditions(), name=f"scheduler-status-{i}")
            tg.create_task(self.recorder.run(), name="scheduler-event-series")
