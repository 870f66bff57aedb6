"""discovery.k8s.io/v1 EndpointSlice and coordination.k8s.io/v1 Lease."""

from __future__ import annotations

from typing import Any

from .base import Model
from .core import ObjectReference
from .meta import TypedObject


class EndpointConditions(Model):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class Endpoint(Model):
    addresses: list[str] | None = None
    conditions: EndpointConditions | None = None
    hostname: str | None = None
    target_ref: ObjectReference | None = None
    node_name: str | None = None
    zone: str | None = None
    hints: dict[str, Any] | None = None


class EndpointSlicePort(Model):
    name: str | None = None
    protocol: str | None = None
    port: int | None = None
    app_protocol: str | None = None


class EndpointSlice(TypedObject):
    address_type: str | None = None
    endpoints: list[Endpoint] | None = None
    ports: list[EndpointSlicePort] | None = None


class LeaseSpec(Model):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None


class Lease(TypedObject):
    spec: LeaseSpec | None = None
