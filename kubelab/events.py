"""EventRecorder: core/v1 Events as components emit them, aggregated the way client-go's correlator does.

An event is posted without blocking the caller: `event()` queues it and one background task posts the
queue in order, one event at a time, as client-go's record broadcaster writes to its sink; at most 1000
wait (maxQueuedEvents) and further ones are dropped, never waited for (DropIfChannelFull). A task per
event instead had 500 RegisteredNode events in flight at once when 500 nodes registered, each queued
behind the others in the client's connection pool. Repeats of the same (object, type, reason, message)
within ten minutes update the first event's count and lastTimestamp instead of creating another
(kubectl then shows "(x3 over 2m)").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from . import kinds, timeutil
from .client import ApiClient, ApiError
from .models import TypedObject

log = logging.getLogger(__name__)

AGGREGATE_WINDOW = 600.0
MAX_QUEUED_EVENTS = 1000  # client-go tools/record maxQueuedEvents


class EventRecorder:
    def __init__(self, api: ApiClient, component: str, host: str | None = None) -> None:
        self.api = api
        self.component = component
        self.host = host
        self._recent: dict[tuple[str, str, str, str], tuple[str, str, int, float]] = {}
        self._queue: deque[tuple[TypedObject, str, str, str, str | None, str | None]] = deque()
        self._queued = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._poster: asyncio.Task[None] | None = None
        self.dropped = 0

    def event(self, obj: TypedObject, event_type: str, reason: str, message: str, *,
              field_path: str | None = None, action: str | None = None) -> None:
        if len(self._queue) >= MAX_QUEUED_EVENTS:
            self.dropped += 1
            return
        self._queue.append((obj, event_type, reason, message, field_path, action))
        self._idle.clear()
        self._queued.set()
        if self._poster is None or self._poster.done():
            self._poster = asyncio.get_running_loop().create_task(self._post_queued(), name=f"{self.component}-events")

    async def _post_queued(self) -> None:
        while True:
            while not self._queue:
                self._idle.set()
                self._queued.clear()
                await self._queued.wait()
            obj, event_type, reason, message, field_path, action = self._queue.popleft()
            await self.post(obj, event_type, reason, message, field_path=field_path, action=action)

    async def flush(self) -> None:
        """Wait until every queued event has been posted (or refused)."""
        if self._poster is not None and not self._poster.done():
            await self._idle.wait()

    async def post(self, obj: TypedObject, event_type: str, reason: str, message: str, *,
                   field_path: str | None = None, action: str | None = None) -> None:
        """Record one event and return once the API server has it (or refused it): for a caller that
        paces its own event traffic, as client-go's broadcaster posts one event at a time."""
        meta = obj.metadata
        namespace = meta.namespace or "default"
        ident = (meta.uid or "", event_type, reason, message)
        now = timeutil.rfc3339()
        previous = self._recent.get(ident)
        try:
            if previous is not None and time.monotonic() - previous[3] < AGGREGATE_WINDOW:
                name, ns, count, _ = previous
                count += 1
                await self.api.patch(kinds.EVENTS, name, {"count": count, "lastTimestamp": now}, ns)
                self._recent[ident] = (name, ns, count, time.monotonic())
                return
            involved: dict[str, Any] = {"kind": obj.kind, "namespace": meta.namespace or "", "name": meta.name,
                                        "uid": meta.uid, "apiVersion": obj.api_version,
                                        "resourceVersion": meta.resource_version}
            if field_path:
                involved["fieldPath"] = field_path
            if not meta.namespace:
                involved.pop("namespace")
            body = {"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": f"{meta.name}.{time.time_ns():x}", "namespace": namespace},
                    "involvedObject": involved, "reason": reason, "message": message, "type": event_type,
                    "source": {"component": self.component, **({"host": self.host} if self.host else {})},
                    "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                    "reportingComponent": self.component, "reportingInstance": self.host or self.component}
            if action:
                body["action"] = action
            # The answer is read for its name only, not decoded into a model: one event is posted per
            # scheduled pod, and the model cost the scheduler's process more than sending the event did.
            created = await self.api.request("POST", kinds.EVENTS.path(namespace), body=body)
            self._recent[ident] = (str(created["metadata"]["name"]), namespace, 1, time.monotonic())
            if len(self._recent) > 4096:
                cutoff = time.monotonic() - AGGREGATE_WINDOW
                self._recent = {k: v for k, v in self._recent.items() if v[3] >= cutoff}
        except ApiError as exc:
            log.debug("%s: event %s for %s not recorded: %s", self.component, reason, meta.name, exc)
        except Exception as exc:  # noqa: BLE001 - events are best effort, as in client-go
            log.debug("%s: event %s for %s not recorded: %s", self.component, reason, meta.name, exc)
