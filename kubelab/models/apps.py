"""apps/v1 kinds (Deployment, ReplicaSet), autoscaling/v1 Scale, and v1 ConfigMap."""

from __future__ import annotations

from typing import Any

from .base import Model
from .core import PodSpec
from .meta import IntOrString, LabelSelector, ObjectMeta, TypedObject


class PodTemplateSpec(Model):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class RollingUpdateDeployment(Model):
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class DeploymentStrategy(Model):
    type: str | None = None
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(Model):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    strategy: DeploymentStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None
    paused: bool | None = None
    progress_deadline_seconds: int | None = None


class DeploymentCondition(Model):
    type: str | None = None
    status: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class DeploymentStatus(Model):
    observed_generation: int | None = None
    replicas: int | None = None
    updated_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    unavailable_replicas: int | None = None
    terminating_replicas: int | None = None
    conditions: list[DeploymentCondition] | None = None
    collision_count: int | None = None


class Deployment(TypedObject):
    spec: DeploymentSpec | None = None
    status: DeploymentStatus | None = None


class ReplicaSetSpec(Model):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None


class ReplicaSetStatus(Model):
    replicas: int | None = None
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    terminating_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] | None = None


class ReplicaSet(TypedObject):
    spec: ReplicaSetSpec | None = None
    status: ReplicaSetStatus | None = None


class ScaleSpec(Model):
    replicas: int | None = None


class ScaleStatus(Model):
    replicas: int | None = None
    selector: str | None = None


class Scale(TypedObject):
    spec: ScaleSpec | None = None
    status: ScaleStatus | None = None


class ConfigMap(TypedObject):
    data: dict[str, str] | None = None
    binary_data: dict[str, str] | None = None
    immutable: bool | None = None
