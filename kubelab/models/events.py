"""events.k8s.io/v1 Event: the same objects as core/v1 Events (one storage, /registry/events), with the
fields renamed as kube's events API names them (note, regarding, reportingController, deprecated*)."""

from __future__ import annotations

from .core import EventSeries, EventSource, ObjectReference
from .meta import TypedObject


class EventsV1Event(TypedObject):
    event_time: str | None = None
    series: EventSeries | None = None
    reporting_controller: str | None = None
    reporting_instance: str | None = None
    action: str | None = None
    reason: str | None = None
    regarding: ObjectReference | None = None
    related: ObjectReference | None = None
    note: str | None = None
    type: str | None = None
    deprecated_source: EventSource | None = None
    deprecated_first_timestamp: str | None = None
    deprecated_last_timestamp: str | None = None
    deprecated_count: int | None = None


__all__ = ["EventsV1Event"]
