"""SeriesRecorder: events.k8s.io/v1 Events as client-go's new events library (tools/events) writes them.

kube-scheduler records through this library when the API server serves events.k8s.io/v1 (the events
broadcaster adapter checks discovery), so its events are written in the events API's shape:

* a new event is created as `<object>.<unix nanoseconds, hex>` in the object's namespace (`default` for a
  cluster-scoped one), with eventTime, reportingController (the component), reportingInstance
  (`<component>-<hostname>`), action, reason, note, type and regarding (the object's reference, its
  resourceVersion included), and no deprecated* fields;
* the same event again (same type, action, reason, reporter and regarding/related objects; the note
  does not count) becomes a series: the second occurrence patches `series: {count: 2,
  lastObservedTime}` onto the first event with a strategic merge patch (created anew if it has gone);
  later occurrences only count in memory, and are written when the series ends (no occurrence for
  6 minutes, `finish_series`) or every 30 minutes while it goes on (`refresh_series`).

So `kubectl get events` and `kubectl describe` show a repeated FailedScheduling as `(x2 over ...)` at
once and the final count later, as against kube-scheduler. Writes are best effort, as in client-go: a
refused event is dropped (logged), never retried in a loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from . import kinds, timeutil
from .client import ApiClient, ApiError
from .client.errors import AlreadyExists, NotFound
from .models import TypedObject

log = logging.getLogger(__name__)

FINISH_TIME = 6 * 60.0    # tools/events finishTime: a series with no occurrence for this long has ended
REFRESH_TIME = 30 * 60.0  # tools/events refreshTime: a running series is written again this often

Key = tuple[Any, ...]


def _micro(seconds: float) -> str:
    return timeutil.rfc3339_micro(datetime.fromtimestamp(seconds, UTC))


def _seconds(text: str) -> float:
    when = timeutil.parse(text)
    return when.timestamp() if when is not None else 0.0


def reference(obj: TypedObject) -> dict[str, Any]:
    """reference.GetReference: the object's ObjectReference, as `regarding` carries it."""
    meta = obj.metadata
    ref = {"kind": obj.kind, "namespace": meta.namespace, "name": meta.name, "uid": meta.uid,
           "apiVersion": obj.api_version, "resourceVersion": meta.resource_version}
    return {k: v for k, v in ref.items() if v}


def event_key(event: dict[str, Any]) -> Key:
    """tools/events getKey: what makes two events the same one (the note is not part of it)."""
    def ref(value: Any) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((value or {}).items()))

    return (event.get("type"), event.get("action"), event.get("reason"), event.get("reportingController"),
            event.get("reportingInstance"), ref(event.get("regarding")), ref(event.get("related")))


def new_event(obj: TypedObject, event_type: str, reason: str, note: str, *, action: str, controller: str,
              instance: str, now: float, related: dict[str, Any] | None = None) -> dict[str, Any]:
    """recorderImpl.makeEvent, as events.k8s.io/v1 JSON. Pure: `now` is the clock (seconds)."""
    regarding = reference(obj)
    body: dict[str, Any] = {
        "apiVersion": kinds.EVENTS_V1.api_version, "kind": "Event",
        "metadata": {"name": f"{regarding.get('name', '')}.{int(now * 1e9):x}",
                     "namespace": regarding.get("namespace") or "default"},
        "eventTime": _micro(now), "reportingController": controller,
        "reportingInstance": instance, "action": action, "reason": reason, "regarding": regarding,
        "note": note, "type": event_type}
    if related:
        body["related"] = related
    return body


class SeriesRecorder:
    """One component's events.k8s.io/v1 recorder. `post` is safe to call from several tasks at once:
    the series bookkeeping happens before any await."""

    def __init__(self, api: ApiClient, controller: str, *, instance: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.controller = controller
        self.instance = instance or f"{controller}-{socket.gethostname()}"
        self.clock = clock
        self.cache: dict[Key, dict[str, Any]] = {}

    async def post(self, obj: TypedObject, event_type: str, reason: str, note: str, *, action: str,
                   related: dict[str, Any] | None = None) -> None:
        """Record one occurrence (recordToSink): create, start a series, or only count."""
        now = self.clock()
        event = new_event(obj, event_type, reason, note, action=action, controller=self.controller,
                          instance=self.instance, now=now, related=related)
        key = event_key(event)
        cached = self.cache.get(key)
        if cached is None:
            self.cache[key] = event
            await self._record(dict(event))
            return
        observed = _micro(now)
        if cached.get("series") is not None:
            cached["series"] = {"count": cached["series"]["count"] + 1, "lastObservedTime": observed}
            return
        cached["series"] = {"count": 2, "lastObservedTime": observed}
        await self._record(dict(cached))

    async def _record(self, event: dict[str, Any]) -> None:
        """recordEvent: a series is patched onto the stored event (created if it has gone; patched
        again if that create found it back); anything else is created."""
        try:
            if event.get("series") is not None:
                try:
                    await self._patch_series(event)
                    return
                except NotFound:
                    pass
                try:
                    await self._create(event)
                except AlreadyExists:
                    await self._patch_series(event)
                return
            await self._create(event)
        except ApiError as exc:
            log.debug("%s: event %s for %s not recorded: %s", self.controller, event.get("reason"),
                      event.get("regarding", {}).get("name"), exc)
        except Exception as exc:  # noqa: BLE001 - events are best effort, as in client-go
            log.debug("%s: event %s not recorded: %s", self.controller, event.get("reason"), exc)

    async def _create(self, event: dict[str, Any]) -> None:
        """POST the event; the answer is not decoded into a model (nothing reads it, and one event per
        scheduled pod made that decoding a measurable part of the scheduler's CPU)."""
        await self.api.request("POST", kinds.EVENTS_V1.path(event["metadata"]["namespace"]), body=event)

    async def _patch_series(self, event: dict[str, Any]) -> None:
        # createPatchBytesForSeries: the two-way strategic merge patch from the event without its series.
        await self.api.patch(kinds.EVENTS_V1, event["metadata"]["name"], {"series": event["series"]},
                             event["metadata"]["namespace"], content_type="application/strategic-merge-patch+json")

    async def finish_series(self) -> None:
        """tools/events finishSeries: a series unobserved for FINISH_TIME is written one last time and
        forgotten; a single event that old is forgotten (a repeat then starts a new event)."""
        horizon = self.clock() - FINISH_TIME
        for key, event in list(self.cache.items()):
            series = event.get("series")
            if series is not None:
                if _seconds(series["lastObservedTime"]) < horizon:
                    await self._record(dict(event))
                    self.cache.pop(key, None)
            elif _seconds(event["eventTime"]) < horizon:
                self.cache.pop(key, None)

    async def refresh_series(self) -> None:
        """tools/events refreshExistingEventSeries: every running series is written again (its count,
        and a fresh TTL for the stored event)."""
        for event in list(self.cache.values()):
            if event.get("series") is not None:
                await self._record(dict(event))

    async def run(self) -> None:
        """The two periodic passes, as StartRecordingToSink starts them."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._every(FINISH_TIME, self.finish_series), name=f"{self.controller}-finish-series")
            tg.create_task(self._every(REFRESH_TIME, self.refresh_series), name=f"{self.controller}-refresh-series")

    @staticmethod
    async def _every(period: float, action: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(period)
            await action()
