"""events.k8s.io/v1 Event: the core/v1 Events served in the events API's names, from the same storage.

kube-apiserver stores events once (/registry/events) and serves them as v1 and as events.k8s.io/v1
through conversion functions (pkg/apis/events/v1/conversion.go). The mapping, both ways:

    events.k8s.io/v1            core/v1
    regarding                   involvedObject
    note                        message
    reportingController         reportingComponent
    deprecatedSource            source
    deprecatedFirstTimestamp    firstTimestamp
    deprecatedLastTimestamp     lastTimestamp
    deprecatedCount             count
    reason, type, action, related, reportingInstance, series, eventTime, metadata: the same

An event written through one version reads through the other with the same name, uid and
resourceVersion. The conversion renames the keys present and leaves absent ones absent, so it
round-trips exactly (kube's Go structs print zero values, `"deprecatedSource": {}` and `null` times;
kubelab leaves them out, as it does for core/v1).

Validation is kube's ValidateEventCreate/ValidateEventUpdate for a request through events.k8s.io/v1: the
legacy rules every event passes plus the strict ones (eventTime required, type Normal or Warning, the
deprecated fields unset, series sane; on update most fields immutable), over the core/v1 shape and with
its field paths, as kube validates the internal type.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubelab import kinds, validation
from kubelab.kinds import ResourceType
from kubelab.models import EventsV1Event, TypedObject
from kubelab.validation import FieldError, GoLiteral, invalid, required

from ..conversion import ServedVersion
from .events import DEFAULT_EVENT_TTL, event_field_labels, legacy_event_errors
from .strategy import Strategy

# events.k8s.io/v1 name -> core/v1 name (the keys that differ).
_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_FROM_CORE = {core: v1 for v1, core in _TO_CORE.items()}


def _renamed(obj: dict[str, Any], names: dict[str, str], api_version: str) -> dict[str, Any]:
    out = {names.get(key, key): value for key, value in obj.items()}
    out["apiVersion"] = api_version
    out["kind"] = "Event"
    return out


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    """Convert_v1_Event_To_core_Event, on JSON."""
    return _renamed(event, _TO_CORE, kinds.EVENTS.api_version)


def from_core(event: dict[str, Any]) -> dict[str, Any]:
    """Convert_core_Event_To_v1_Event, on JSON."""
    return _renamed(event, _FROM_CORE, kinds.EVENTS_V1.api_version)


def served_version() -> ServedVersion:
    """events.k8s.io/v1 events over the core/v1 event storage."""
    return ServedVersion(kinds.EVENTS_V1, kinds.EVENTS, to_core, from_core)


# events.k8s.io/v1 field label -> the core/v1 selectable field it reads
# (pkg/apis/events/v1 AddFieldLabelConversionsForEvent).
FIELD_LABELS = {
    "metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace", "reason": "reason",
    "regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent",
    "source": "source", "type": "type",
}


def _go_reference(ref: Any) -> GoLiteral:
    """A core.ObjectReference as Go's %#v prints it in a field error."""
    ref = ref if isinstance(ref, dict) else {}
    parts = [f"{go}:{validation.go_quote(str(ref.get(json) or ''))}" for go, json in (
        ("Kind", "kind"), ("Namespace", "namespace"), ("Name", "name"), ("UID", "uid"),
        ("APIVersion", "apiVersion"), ("ResourceVersion", "resourceVersion"), ("FieldPath", "fieldPath"))]
    return GoLiteral("core.ObjectReference{" + ", ".join(parts) + "}")


def _go_time(text: Any) -> Any:
    """A metav1.(Micro)Time as its String() prints it (`2026-12-02 01:00:00.5 +0000 UTC`)."""
    if not isinstance(text, str) or not text:
        return GoLiteral("0001-01-01 00:00:00 +0000 UTC")
    try:
        when = datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        return text
    fraction = f"{when.microsecond:06d}".rstrip("0")
    return GoLiteral(when.strftime("%Y-%m-%d %H:%M:%S") + (f".{fraction}" if fraction else "") + " +0000 UTC")


def _series_errors(event: dict[str, Any]) -> list[FieldError]:
    series = event.get("series")
    if series is None:
        return []
    errs: list[FieldError] = []
    count = series.get("count") if isinstance(series, dict) else None
    if not isinstance(count, int) or count < 2:
        errs.append(invalid("series.count", "", "should be at least 2"))
    if not (series.get("lastObservedTime") if isinstance(series, dict) else None):
        errs.append(required("series.lastObservedTime"))
    return errs


def strict_create_errors(event: dict[str, Any]) -> list[FieldError]:
    """ValidateEventCreate's rules for events.k8s.io/v1 (past the legacy ones and ObjectMeta)."""
    errs = _series_errors(event)
    if not event.get("eventTime"):
        errs.append(required("eventTime"))
    event_type = event.get("type") or ""
    if event_type not in ("Normal", "Warning"):
        errs.append(invalid("type", "", f"has invalid value: {event_type}"))
    for field in ("firstTimestamp", "lastTimestamp"):
        if event.get(field):
            errs.append(invalid(field, "", "needs to be unset"))
    if event.get("count"):
        errs.append(invalid("count", "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        errs.append(invalid("source", "", "needs to be unset"))
    return errs


def _go_source(source: Any) -> GoLiteral:
    source = source if isinstance(source, dict) else {}
    return GoLiteral(f"core.EventSource{{Component:{validation.go_quote(str(source.get('component') or ''))}, "
                     f"Host:{validation.go_quote(str(source.get('host') or ''))}}}")


def _shown(value: Any) -> Any:
    return value if value is not None else ""


# ValidateEventUpdate's immutable fields in its order (reason twice, as kube checks it twice), with how
# Go prints each value in the error.
_IMMUTABLE: tuple[tuple[str, Any], ...] = (
    ("involvedObject", _go_reference), ("reason", _shown), ("message", _shown), ("source", _go_source),
    ("firstTimestamp", _go_time), ("lastTimestamp", _go_time), ("count", lambda v: v or 0), ("reason", _shown),
    ("type", _shown), ("eventTime", _go_time), ("action", _shown),
    ("related", lambda v: GoLiteral(validation.go_repr(v))), ("reportingComponent", _shown),
    ("reportingInstance", _shown))
# The internal field names kube's paths use where the core/v1 JSON name differs.
_PATHS = {"reportingComponent": "reportingController"}


def _semantic(value: Any) -> Any:
    """A value with Go's zero values dropped, so "" and absent compare equal (Semantic.DeepEqual)."""
    if isinstance(value, dict):
        kept = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", 0, {}, [])} or None
    return value if value not in ("", 0) else None


def strict_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """ValidateEventUpdate's rules for events.k8s.io/v1 past the legacy ones and the metadata's: a new
    series is checked, and what the event says may not change."""
    errs: list[FieldError] = []
    if _semantic(new.get("series")) != _semantic(old.get("series")):
        errs += _series_errors(new)
    for field, printer in _IMMUTABLE:
        before, after = _semantic(old.get(field)), _semantic(new.get(field))
        if field == "related":  # a pointer in Go: an empty reference is not no reference
            before, after = (old.get(field) is not None, before), (new.get(field) is not None, after)
        if before != after:
            errs.append(invalid(_PATHS.get(field, field), printer(new.get(field)), "field is immutable"))
    return errs


class EventsV1Strategy(Strategy):
    """events.k8s.io/v1 Events: validated as kube validates a write through that version; selected by
    the events API's field labels."""

    has_status = False
    default_gc_policy = "Background"

    def __init__(self, rt: ResourceType, *, ttl: int = DEFAULT_EVENT_TTL) -> None:
        super().__init__(rt)
        self.ttl = ttl

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, EventsV1Event)
        event = to_core(obj.to_dict())
        return legacy_event_errors(event) + self.validate_meta(obj) + strict_create_errors(event)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        event = to_core(new.to_dict())
        return (legacy_event_errors(event) + self.validate_meta_update(new, old)
                + strict_update_errors(event, to_core(old.to_dict())))

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        core = event_field_labels(to_core(obj))
        return {label: core[field] for label, field in FIELD_LABELS.items()}

    def supported_fields(self) -> set[str]:
        return set(FIELD_LABELS)
