"""policy/v1 PodDisruptionBudget and Eviction: how many of a set of pods voluntary evictions may take."""

from __future__ import annotations

from typing import Any

from .base import Model
from .meta import IntOrString, LabelSelector, TypedObject


class PodDisruptionBudgetSpec(Model):
    min_available: IntOrString | None = None
    max_unavailable: IntOrString | None = None
    selector: LabelSelector | None = None
    unhealthy_pod_eviction_policy: str | None = None


class PodDisruptionBudgetStatus(Model):
    observed_generation: int | None = None
    disrupted_pods: dict[str, str] | None = None
    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None
    conditions: list[dict[str, Any]] | None = None


class PodDisruptionBudget(TypedObject):
    spec: PodDisruptionBudgetSpec | None = None
    status: PodDisruptionBudgetStatus | None = None


class Eviction(TypedObject):
    delete_options: dict[str, Any] | None = None
