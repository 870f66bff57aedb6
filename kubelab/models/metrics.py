"""metrics.k8s.io/v1beta1 (k8s.io/metrics): what `kubectl top` reads. Served, never stored."""

from __future__ import annotations

from .base import Model
from .meta import TypedObject


class NodeMetrics(TypedObject):
    timestamp: str | None = None
    window: str | None = None
    usage: dict[str, str] | None = None


class ContainerMetrics(Model):
    name: str | None = None
    usage: dict[str, str] | None = None


class PodMetrics(TypedObject):
    timestamp: str | None = None
    window: str | None = None
    containers: list[ContainerMetrics] | None = None
