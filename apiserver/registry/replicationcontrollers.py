"""v1 ReplicationControllers: defaults and validation as kube-apiserver's, scale subresource on spec.replicas.

SetDefaults_ReplicationController: the selector and the object's labels default to the template's labels,
and replicas to 1. The selector is a plain label map, it must not be empty and must select the template;
unlike apps/v1 selectors it may change. A v1 ReplicationController orphans its pods when deleted without
a propagation policy (its DefaultGarbageCollectionPolicy, kept from before garbage collection existed).
"""

from __future__ import annotations

from typing import Any

from kubelab.models import ReplicationController, TypedObject
from kubelab.selectors import selector_from_map
from kubelab.validation import FieldError, required

from .workloads import TemplateStrategy, default_template, nonnegative, validate_template


class ReplicationControllerStrategy(TemplateStrategy):
    status_zero = ("replicas",)  # ReplicationControllerStatus.Replicas has no omitempty
    default_gc_policy = "Orphan"

    def set_defaults(self, obj: TypedObject) -> None:
        assert isinstance(obj, ReplicationController)
        spec = obj.spec
        if spec is None:
            return
        default_template(self.pods, spec.template)
        labels = (spec.template.metadata.labels if spec.template and spec.template.metadata else None) or {}
        if labels:
            if not spec.selector:
                spec.selector = dict(labels)
            if not obj.metadata.labels:
                obj.metadata.labels = dict(labels)
        if spec.replicas is None:
            spec.replicas = 1

    def validate_spec(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, ReplicationController)
        spec = obj.spec
        if spec is None:
            return [required("spec")]
        errs = nonnegative(spec.min_ready_seconds, "spec.minReadySeconds")
        if not spec.selector:
            errs.append(required("spec.selector"))
        errs += nonnegative(spec.replicas, "spec.replicas")
        selector = selector_from_map(spec.selector) if spec.selector else None
        errs += validate_template(self.pods, spec.template, selector, kind="ReplicationController")
        return errs

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        # kube's ReplicationController field selectors: status.replicas besides the name and namespace.
        fields = super().field_labels(obj)
        fields["status.replicas"] = str((obj.get("status") or {}).get("replicas", ""))
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"status.replicas"}
