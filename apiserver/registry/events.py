"""Events and Leases: small kinds with little to check."""

from __future__ import annotations

from typing import Any

from kubelab.kinds import ResourceType
from kubelab.models import Event, Lease, TypedObject
from kubelab.validation import FieldError, invalid, required

from .strategy import Strategy

# kube-apiserver's --event-ttl default: an event is gone an hour after its last write.
DEFAULT_EVENT_TTL = 3600


class EventStrategy(Strategy):
    has_status = False

    def __init__(self, rt: ResourceType, *, ttl: int = DEFAULT_EVENT_TTL) -> None:
        super().__init__(rt)
        self.ttl = ttl

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Event)
        errs = self.validate_meta(obj)
        involved = obj.involved_object
        if involved is None:
            errs.append(required("involvedObject"))
        elif involved.namespace and obj.metadata.namespace and involved.namespace != obj.metadata.namespace:
            errs.append(invalid("involvedObject.namespace", involved.namespace, "does not match event.namespace"))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        return self.validate_create(new)

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        fields = super().field_labels(obj)
        inv = obj.get("involvedObject") or {}
        source = obj.get("source") or {}
        fields.update({
            "involvedObject.kind": inv.get("kind", ""),
            "involvedObject.namespace": inv.get("namespace", ""),
            "involvedObject.name": inv.get("name", ""),
            "involvedObject.uid": inv.get("uid", ""),
            "involvedObject.apiVersion": inv.get("apiVersion", ""),
            "involvedObject.resourceVersion": inv.get("resourceVersion", ""),
            "involvedObject.fieldPath": inv.get("fieldPath", ""),
            "reason": obj.get("reason", ""),
            "reportingComponent": obj.get("reportingComponent", ""),
            "source": source.get("component", ""),
            "type": obj.get("type", ""),
        })
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {
            "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
            "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
            "reason", "reportingComponent", "source", "type"}


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
