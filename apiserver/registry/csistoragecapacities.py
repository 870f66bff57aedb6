"""storage.k8s.io/v1 CSIStorageCapacities: validation as kube-apiserver's csistoragecapacity strategy has it
(pkg/apis/storage/validation): a DNS-subdomain name and storage class, a valid nodeTopology selector, a
non-negative capacity, and nodeTopology and storageClassName immutable (the inputs of the driver's
GetCapacity call). No CSI driver publishes any in kubelab; clients' own objects are stored and served.
Quantities are kept as written (kube-apiserver re-serializes them canonically: "1024Mi" reads "1Gi")."""

from __future__ import annotations

from kubelab import quantity, validation
from kubelab.models import CSIStorageCapacity, TypedObject
from kubelab.validation import FieldError, GoLiteral, invalid

from .. import errors
from .networkpolicies import label_selector_errors
from .strategy import Strategy
from .workloads import go_selector

_QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class CSIStorageCapacityStrategy(Strategy):
    has_status = False

    def set_defaults(self, obj: TypedObject) -> None:
        """Decoding: capacity and maximumVolumeSize are resource.Quantity, whose JSON decoder refuses a
        string that is not one (kube's 400, before validation)."""
        assert isinstance(obj, CSIStorageCapacity)
        for value in (obj.capacity, obj.maximum_volume_size):
            if value is not None and not quantity.is_valid(value):
                raise errors.bad_request('CSIStorageCapacity in version "v1" cannot be handled as a '
                                         f"CSIStorageCapacity: {_QUANTITY_MSG}")

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, CSIStorageCapacity)
        return self.validate_meta(obj) + _spec_errors(obj)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        """The strategy's ValidateUpdate: the object, then ValidateCSIStorageCapacityUpdate (the metadata
        update, then the two immutable fields, the selector printed as Go's %#v of the dereferenced pointer)."""
        assert isinstance(new, CSIStorageCapacity) and isinstance(old, CSIStorageCapacity)
        errs = self.validate_meta(new) + _spec_errors(new) + self.validate_meta_update(new, old)
        new_topology = new.node_topology.to_dict() if new.node_topology else None
        if new_topology != (old.node_topology.to_dict() if old.node_topology else None):
            shown = GoLiteral(go_selector(new.node_topology).removeprefix("&")) if new.node_topology else None
            errs.append(invalid("nodeTopology", shown, "field is immutable"))
        if (new.storage_class_name or "") != (old.storage_class_name or ""):
            errs.append(invalid("storageClassName", new.storage_class_name or "", "field is immutable"))
        return errs


def _spec_errors(obj: CSIStorageCapacity) -> list[FieldError]:
    errs = label_selector_errors(obj.node_topology, "nodeTopology")
    name = obj.storage_class_name or ""
    errs += [invalid("storageClassName", name, p) for p in validation.dns1123_subdomain_errors(name)]
    if obj.capacity is not None and quantity.parse(obj.capacity) < 0:
        errs.append(invalid("capacity", obj.capacity, "must be greater than or equal to 0"))
    return errs
