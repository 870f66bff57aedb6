"""meta/v1 shapes shared by every kind: ObjectMeta, owner references, label selectors, Status."""

from __future__ import annotations

from typing import Any

from .base import Model

IntOrString = int | str


class OwnerReference(Model):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class LabelSelectorRequirement(Model):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelector(Model):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class ListMeta(Model):
    resource_version: str | None = None
    continue_: str | None = None
    remaining_item_count: int | None = None


class StatusCause(Model):
    reason: str | None = None
    message: str | None = None
    field: str | None = None


class StatusDetails(Model):
    name: str | None = None
    group: str | None = None
    kind: str | None = None
    uid: str | None = None
    causes: list[StatusCause] | None = None
    retry_after_seconds: int | None = None


class Status(Model):
    api_version: str | None = "v1"
    kind: str | None = "Status"
    metadata: dict[str, Any] | None = None
    status: str | None = None
    message: str | None = None
    reason: str | None = None
    details: StatusDetails | None = None
    code: int | None = None


class TypedObject(Model):
    """Any top-level object: apiVersion, kind and metadata."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = ObjectMeta()

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""

    @property
    def key(self) -> str:
        """The cache key client-go uses: `namespace/name`, or `name` for cluster-scoped objects."""
        if self.metadata.namespace:
            return f"{self.metadata.namespace}/{self.metadata.name}"
        return self.metadata.name or ""

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels or {}
