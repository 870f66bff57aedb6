"""Namespaces and Nodes: the cluster-scoped kinds."""

from __future__ import annotations

from typing import Any

from kubelab import validation
from kubelab.models import Namespace, NamespaceSpec, NamespaceStatus, Node, TypedObject
from kubelab.validation import FieldError, invalid

from .strategy import Strategy


class NamespaceStrategy(Strategy):
    name_check = staticmethod(validation.dns1123_label_errors)

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, Namespace)
        obj.spec = obj.spec or NamespaceSpec()
        obj.spec.finalizers = ["kubernetes"]
        obj.status = NamespaceStatus(phase="Active")
        # kube-apiserver labels every namespace with its own name (NamespaceDefaultLabelName, 1.22+).
        obj.metadata.labels = {**(obj.metadata.labels or {}), "kubernetes.io/metadata.name": obj.metadata.name or ""}

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        super().prepare_update(new, old, subresource)
        assert isinstance(new, Namespace) and isinstance(old, Namespace)
        new.spec = old.spec
        new.metadata.labels = {**(new.metadata.labels or {}), "kubernetes.io/metadata.name": new.metadata.name or ""}

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        fields = super().field_labels(obj)
        fields["status.phase"] = (obj.get("status") or {}).get("phase", "")
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"status.phase"}


class NodeStrategy(Strategy):
    def prepare_create(self, obj: TypedObject) -> None:
        # Unlike most kinds, a Node keeps the status it is created with: the kubelet registers
        # its capacity and conditions in the same POST.
        status = getattr(obj, "status", None)
        super().prepare_create(obj)
        assert isinstance(obj, Node)
        obj.status = status

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, Node)
        errs = self.validate_meta(obj)
        if obj.spec and obj.spec.pod_cidr:
            import ipaddress
            try:
                ipaddress.ip_network(obj.spec.pod_cidr)
            except ValueError:
                errs.append(invalid("spec.podCIDRs[0]", obj.spec.pod_cidr, "must be a valid CIDR"))
        for i, taint in enumerate((obj.spec.taints if obj.spec else None) or []):
            if taint.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                errs.append(validation.not_supported(f"spec.taints[{i}].effect", taint.effect,
                                                     ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
        return errs

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, Node) and isinstance(old, Node)
        errs = super().validate_update(new, old, subresource)
        old_cidr = old.spec.pod_cidr if old.spec else None
        new_cidr = new.spec.pod_cidr if new.spec else None
        if old_cidr and new_cidr != old_cidr:
            errs.append(validation.forbidden("spec.podCIDRs", "node updates may not change podCIDR except from "
                                                              "\"\" to valid"))
        return errs

    def field_labels(self, obj: dict[str, Any]) -> dict[str, str]:
        fields = super().field_labels(obj)
        fields["spec.unschedulable"] = "true" if (obj.get("spec") or {}).get("unschedulable") else "false"
        return fields

    def supported_fields(self) -> set[str]:
        return super().supported_fields() | {"spec.unschedulable"}
