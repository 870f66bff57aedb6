"""apps/v1 DaemonSet, StatefulSet and ControllerRevision, and v1 ReplicationController.

The fields the API server defaults and validates and the controllers read; everything else a manifest
carries is kept as is (`extra="allow"`), so objects round-trip unchanged.
"""

from __future__ import annotations

from typing import Any

from .apps import PodTemplateSpec
from .base import Model
from .meta import IntOrString, LabelSelector, TypedObject


class RollingUpdateDaemonSet(Model):
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class DaemonSetUpdateStrategy(Model):
    type: str | None = None
    rolling_update: RollingUpdateDaemonSet | None = None


class DaemonSetSpec(Model):
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    update_strategy: DaemonSetUpdateStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None


class DaemonSetStatus(Model):
    current_number_scheduled: int | None = None
    number_misscheduled: int | None = None
    desired_number_scheduled: int | None = None
    number_ready: int | None = None
    observed_generation: int | None = None
    updated_number_scheduled: int | None = None
    number_available: int | None = None
    number_unavailable: int | None = None
    collision_count: int | None = None
    conditions: list[dict[str, Any]] | None = None


class DaemonSet(TypedObject):
    spec: DaemonSetSpec | None = None
    status: DaemonSetStatus | None = None


class RollingUpdateStatefulSetStrategy(Model):
    partition: int | None = None
    max_unavailable: IntOrString | None = None


class StatefulSetUpdateStrategy(Model):
    type: str | None = None
    rolling_update: RollingUpdateStatefulSetStrategy | None = None


class StatefulSetPersistentVolumeClaimRetentionPolicy(Model):
    when_deleted: str | None = None
    when_scaled: str | None = None


class StatefulSetOrdinals(Model):
    start: int | None = None


class StatefulSetSpec(Model):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    volume_claim_templates: list[dict[str, Any]] | None = None
    service_name: str | None = None
    pod_management_policy: str | None = None
    update_strategy: StatefulSetUpdateStrategy | None = None
    revision_history_limit: int | None = None
    min_ready_seconds: int | None = None
    persistent_volume_claim_retention_policy: StatefulSetPersistentVolumeClaimRetentionPolicy | None = None
    ordinals: StatefulSetOrdinals | None = None


class StatefulSetStatus(Model):
    observed_generation: int | None = None
    replicas: int | None = None
    ready_replicas: int | None = None
    current_replicas: int | None = None
    updated_replicas: int | None = None
    current_revision: str | None = None
    update_revision: str | None = None
    collision_count: int | None = None
    available_replicas: int | None = None
    conditions: list[dict[str, Any]] | None = None


class StatefulSet(TypedObject):
    spec: StatefulSetSpec | None = None
    status: StatefulSetStatus | None = None


class ControllerRevision(TypedObject):
    data: dict[str, Any] | None = None
    revision: int | None = None


class ReplicationControllerSpec(Model):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: dict[str, str] | None = None
    template: PodTemplateSpec | None = None


class ReplicationControllerStatus(Model):
    replicas: int | None = None
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] | None = None


class ReplicationController(TypedObject):
    spec: ReplicationControllerSpec | None = None
    status: ReplicationControllerStatus | None = None
