"""Events and Leases: small kinds with little to check.

Event validation is kube's (pkg/apis/core/validation/events.go), written once over the core/v1 shape
that both served versions convert to: `legacy_event_errors` holds for every event, whichever version
wrote it; an events.k8s.io/v1 write adds the strict rules of `strict_create_errors` and
`strict_update_errors` (eventsv1.py). The field paths are the core/v1 ones (`message`, `source`,
`firstTimestamp`) in both versions, as kube validates the internal type.
"""

from __future__ import annotations

from typing import Any

from kubelab import validation
from kubelab.kinds import ResourceType
from kubelab.models import Event, Lease, TypedObject
from kubelab.validation import FieldError, invalid, required

from .. import defaults
from .strategy import Strategy

DEFAULT_EVENT_TTL = defaults.EVENT_TTL  # kube-apiserver's --event-ttl default (apiserver/defaults.py)

# pkg/apis/core/validation/events.go
REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024


def _too_long(field: str, limit: int) -> FieldError:
    # kube reports these with an empty value: field.Invalid(path, "", "can have at most N characters").
    return invalid(field, "", f"can have at most {limit} characters")


def legacy_event_errors(event: dict[str, Any]) -> list[FieldError]:
    """legacyValidateEvent, on a core/v1 event: every event passes it, whichever version wrote it.

    An event without eventTime (the old API's) must name its involved object's namespace as its own
    ("" or `default` for a cluster-scoped object); one with eventTime (the events API's) may live in
    `default` or `kube-system` for a cluster-scoped object and must say who reported it, and what."""
    errs: list[FieldError] = []
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved_ns = (event.get("involvedObject") or {}).get("namespace") or ""
    if not event.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        elif namespace != involved_ns:
            errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        return errs
    if not involved_ns and namespace not in ("default", "kube-system"):
        errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    controller = event.get("reportingComponent") or ""
    if not controller:
        errs.append(required("reportingController"))
    errs += [invalid("reportingController", controller, msg) for msg in validation.qualified_name_errors(controller)]
    instance = event.get("reportingInstance") or ""
    if not instance:
        errs.append(required("reportingInstance"))
    if validation.go_len(instance) > REPORTING_INSTANCE_LENGTH_LIMIT:
        errs.append(_too_long("reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT))
    action = event.get("action") or ""
    if not action:
        errs.append(required("action"))
    if validation.go_len(action) > ACTION_LENGTH_LIMIT:
        errs.append(_too_long("action", ACTION_LENGTH_LIMIT))
    reason = event.get("reason") or ""
    if not reason:
        errs.append(required("reason"))
    if validation.go_len(reason) > REASON_LENGTH_LIMIT:
        errs.append(_too_long("reason", REASON_LENGTH_LIMIT))
    if validation.go_len(event.get("message") or "") > NOTE_LENGTH_LIMIT:
        errs.append(_too_long("message", NOTE_LENGTH_LIMIT))
    return errs


def event_field_labels(event: dict[str, Any]) -> dict[str, str]:
    """EventToSelectableFields over a core/v1 event (pkg/apis/events/selection.go): `source` is the
    old source's component, or the reporting controller of an event the events API wrote (which has no
    source), so `--field-selector source=default-scheduler` finds the scheduler's events either way."""
    meta = event.get("metadata") or {}
    inv = event.get("involvedObject") or {}
    source = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
    return {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "involvedObject.kind": inv.get("kind", ""),
        "involvedObject.namespace": inv.get("namespace", ""),
        "involvedObject.name": inv.get("name", ""),
        "involvedObject.uid": inv.get("uid", ""),
        "involvedObject.apiVersion": inv.get("apiVersion", ""),
        "involvedObject.resourceVersion": inv.get("resourceVersion", ""),
        "involvedObject.fieldPath": inv.get("fieldPath", ""),
        "reason": event.get("reason", ""),
        "reportingComponent": event.get("reportingComponent", ""),
        "source": source,
        "type": event.get("type", ""),
    }


class EventStrategy(Strategy):
    """core/v1 Events: only the legacy rules (kube keeps them loose for old clients)."""

    has_status = False

    def __init__(self, rt: ResourceType, *, ttl: int = DEFAULT_EVENT_TTL) -> None:
        super().__init__(rt)
        self.ttl = ttl

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Event)
        errs = self.validate_meta(obj)
        if obj.involved_object is None:
            errs.append(required("involvedObject"))
        return errs + legacy_event_errors(obj.to_dict())

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        return self.validate_create(new)

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        return event_field_labels(obj)

    def supported_fields(self) -> set[str]:
        # AddFieldLabelConversionsForEvent (core/v1)
        return set(event_field_labels({}))


class LeaseStrategy(Strategy):
    has_status = False

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        """ValidateLeaseSpec: a positive duration, no negative transition count (a Lease with either
        would be read by every elector as expired, or count backwards)."""
        assert isinstance(obj, Lease)
        errs = self.validate_meta(obj)
        spec = obj.spec
        if spec is not None and spec.lease_duration_seconds is not None and spec.lease_duration_seconds <= 0:
            errs.append(invalid("spec.leaseDurationSeconds", spec.lease_duration_seconds, "must be greater than 0"))
        if spec is not None and spec.lease_transitions is not None and spec.lease_transitions < 0:
            errs.append(invalid("spec.leaseTransitions", spec.lease_transitions, "must be greater than or equal to 0"))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        errs = self.validate_create(new)
        if new.metadata.name != old.metadata.name:
            errs.append(invalid("metadata.name", new.metadata.name, "field is immutable"))
        return errs
