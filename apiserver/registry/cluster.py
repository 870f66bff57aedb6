"""Namespaces and Nodes: the cluster-scoped kinds."""

from __future__ import annotations

from typing import Any

from kubelab import timeutil, validation, wellknown
from kubelab.models import Namespace, NamespaceSpec, NamespaceStatus, Node, TypedObject
from kubelab.validation import FieldError, invalid

from ..storage import Txn
from .strategy import Strategy

TERMINATING_PREFIX = "/registry/terminating-namespaces/"


def terminating_key(namespace: str) -> str:
    """Present while `namespace` is being deleted; every create in it checks this key is absent, in
    the same etcd transaction, so nothing can slip into a namespace that is going away."""
    return TERMINATING_PREFIX + namespace


# IsStandardFinalizerName: the finalizers that need no domain prefix.
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _finalizer_name_errors(name: str) -> list[FieldError]:
    """validateFinalizerName, at spec.finalizers: a qualified name, and a standard one unless prefixed."""
    errs = [invalid("spec.finalizers", name, p) for p in validation.qualified_name_errors(name)]
    if not errs and "/" not in name and name not in STANDARD_FINALIZERS:
        errs.append(invalid("spec.finalizers", name, "name is neither a standard finalizer name nor is it fully "
                                                     "qualified"))
    return errs


class NamespaceStrategy(Strategy):
    name_check = staticmethod(validation.dns1123_label_errors)

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        assert isinstance(obj, Namespace)
        obj.spec = obj.spec or NamespaceSpec()
        obj.spec.finalizers = ["kubernetes"]
        obj.status = NamespaceStatus(phase="Active")
        # kube-apiserver labels every namespace with its own name (NamespaceDefaultLabelName, 1.22+).
        obj.metadata.labels = {**(obj.metadata.labels or {}), wellknown.NAMESPACE_NAME: obj.metadata.name or ""}

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        super().prepare_update(new, old, subresource)
        assert isinstance(new, Namespace) and isinstance(old, Namespace)
        if subresource == "finalize":
            # The finalize subresource changes spec.finalizers and nothing else.
            finalizers = new.spec.finalizers if new.spec else None
            meta, status = old.metadata.model_copy(update={"resource_version": new.metadata.resource_version}), \
                old.status
            new.metadata, new.status = meta, status
            new.spec = (old.spec or NamespaceSpec()).model_copy(update={"finalizers": finalizers})
            return
        new.spec = old.spec
        new.metadata.labels = {**(new.metadata.labels or {}), wellknown.NAMESPACE_NAME: new.metadata.name or ""}
        if old.metadata.deletion_timestamp and subresource is None:
            new.status = old.status

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        """ValidateNamespaceUpdate, ValidateNamespaceStatusUpdate and ValidateNamespaceFinalizeUpdate:
        ObjectMeta's update rules only, so a namespace stored under a name that does not validate (written
        straight into etcd, or by an older server) can still be updated and finalized. A finalize writes
        nothing but spec.finalizers (prepare_update keeps the stored metadata), so that is all it checks."""
        assert isinstance(new, Namespace)
        if subresource == "finalize":
            return [err for name in (new.spec.finalizers if new.spec else None) or []
                    for err in _finalizer_name_errors(name)]
        return self.validate_meta_update(new, old)

    def mark_for_deletion(self, obj: TypedObject, options: dict[str, object]) -> Txn | None:
        """Deleting a namespace makes it Terminating; the namespace controller empties it and removes the
        `kubernetes` finalizer through /finalize, which completes the deletion."""
        assert isinstance(obj, Namespace)
        if not (obj.spec and obj.spec.finalizers) and not obj.metadata.finalizers:
            return None
        txn = Txn()
        if not obj.metadata.deletion_timestamp:
            obj.metadata.deletion_timestamp = timeutil.rfc3339()
            obj.metadata.deletion_grace_period_seconds = 0
            txn.create[terminating_key(obj.metadata.name or "")] = b"{}"
        obj.status = NamespaceStatus(phase="Terminating", conditions=obj.status.conditions if obj.status else None)
        return txn

    def should_delete_on_update(self, obj: TypedObject) -> bool:
        assert isinstance(obj, Namespace)
        return super().should_delete_on_update(obj) and not (obj.spec and obj.spec.finalizers)

    def release(self, obj: TypedObject) -> Txn:
        return Txn(delete=[terminating_key(obj.metadata.name or "")])

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
            try:
                validation.parse_cidr(obj.spec.pod_cidr, strict=True)
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
