"""storage.k8s.io/v1 CSIStorageCapacity: how much storage a CSI driver reports for a storage class in a
topology segment (the scheduler's volume binding reads it). A CSI driver's external-provisioner publishes
these; kubelab has no storage, so only what clients write is there."""

from __future__ import annotations

from .meta import LabelSelector, TypedObject


class CSIStorageCapacity(TypedObject):
    node_topology: LabelSelector | None = None
    storage_class_name: str | None = None
    capacity: str | None = None  # resource.Quantity
    maximum_volume_size: str | None = None  # resource.Quantity
