"""apiextensions.k8s.io/v1 CustomResourceDefinition, and the objects the kinds it defines are made of.

A definition's spec (names, scope, versions with their OpenAPI v3 schemas) is kept as JSON: the API
server reads it with the pure helpers of apiserver/registry/crds.py, and a schema is data to walk, not
a type to model. A custom object is any top-level object: apiVersion, kind, metadata, and whatever else
its schema allows (`extra="allow"` keeps it).
"""

from __future__ import annotations

from typing import Any

from .meta import TypedObject


class CustomResourceDefinition(TypedObject):
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None


class CustomObject(TypedObject):
    """An object of a kind a CustomResourceDefinition defines: only metadata is typed."""
