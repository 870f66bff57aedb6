"""apiregistration.k8s.io/v1 APIService: which server answers a group version (kube-aggregator's kind)."""

from __future__ import annotations

from typing import Any

from .base import Model
from .meta import TypedObject


class ServiceReference(Model):
    namespace: str | None = None
    name: str | None = None
    port: int | None = None


class APIServiceSpec(Model):
    service: ServiceReference | None = None
    group: str | None = None
    version: str | None = None
    insecure_skip_tls_verify: bool | None = None
    ca_bundle: str | None = None
    group_priority_minimum: int | None = None
    version_priority: int | None = None


class APIServiceStatus(Model):
    conditions: list[dict[str, Any]] | None = None


class APIService(TypedObject):
    spec: APIServiceSpec | None = None
    status: APIServiceStatus | None = None
