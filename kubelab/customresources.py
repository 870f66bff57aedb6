"""What a CustomResourceDefinition defines, read from its JSON: the resources it serves and where they are stored.

Shared by the API server (which serves them, apiserver/apiextensions.py) and the controllers (the garbage
collector and the namespace controller find custom objects through it). Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from . import models
from .kinds import ResourceType


def spec_of(crd: dict[str, Any]) -> dict[str, Any]:
    spec = crd.get("spec")
    return spec if isinstance(spec, dict) else {}


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def versions_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(v) for v in as_list(spec.get("versions"))]


def storage_version(spec: dict[str, Any]) -> str:
    return next((str(v.get("name")) for v in versions_of(spec) if v.get("storage") is True), "")


def condition(crd: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in as_list(as_dict(crd.get("status")).get("conditions"))
                 if isinstance(c, dict) and c.get("type") == ctype), None)


def is_condition_true(crd: dict[str, Any], ctype: str) -> bool:
    found = condition(crd, ctype)
    return found is not None and found.get("status") == "True"


def status_enabled(version: dict[str, Any]) -> bool:
    return isinstance(as_dict(version.get("subresources")).get("status"), dict)


def scale_of_version(version: dict[str, Any]) -> dict[str, Any] | None:
    scale = as_dict(version.get("subresources")).get("scale")
    return scale if isinstance(scale, dict) else None


def _resource_type(crd: dict[str, Any], version: dict[str, Any], names: dict[str, Any]) -> ResourceType:
    spec = spec_of(crd)
    group, plural = str(spec.get("group") or ""), str(names.get("plural") or "")
    subresources = (("status",) if status_enabled(version) else ()) + (
        ("scale",) if scale_of_version(version) is not None else ())
    return ResourceType(
        group, str(version.get("name") or ""), plural, str(names.get("kind") or ""), spec.get("scope") == "Namespaced",
        models.CustomObject, short_names=tuple(str(n) for n in as_list(names.get("shortNames"))),
        categories=tuple(str(c) for c in as_list(names.get("categories"))), subresources=subresources,
        singular=str(names.get("singular") or ""), storage_name=f"{group}/{plural}",
        definition=json.dumps(version, sort_keys=True, separators=(",", ":")))


def served_types(crd: dict[str, Any]) -> tuple[ResourceType, ...]:
    """The resources an Established definition serves: one per served version, named by its accepted names
    (apiextensions serves status.acceptedNames, not spec.names), all stored under /registry/<group>/<plural>/."""
    names = as_dict(as_dict(crd.get("status")).get("acceptedNames"))
    if not (names.get("plural") and names.get("kind") and is_condition_true(crd, "Established")):
        return ()
    return tuple(_resource_type(crd, version, names) for version in versions_of(spec_of(crd))
                 if version.get("served") is True and isinstance(version.get("name"), str))


def storage_type(crd: dict[str, Any]) -> ResourceType | None:
    """The resource in the storage version, served or not: what the cleanup finalizer lists and deletes."""
    spec = spec_of(crd)
    version = next((v for v in versions_of(spec) if v.get("storage") is True), None)
    names = as_dict(spec.get("names"))
    if version is None or not names.get("plural"):
        return None
    return _resource_type(crd, version, names)


def version_field(crd: dict[str, Any], version: str, name: str) -> Any:
    """One field of one version of a definition (`additionalPrinterColumns`, `schema`), or None."""
    return next((each.get(name) for each in versions_of(spec_of(crd)) if each.get("name") == version), None)


def version_schema(crd: dict[str, Any], version: str) -> dict[str, Any] | None:
    """The openAPIV3Schema of one version of a definition."""
    found = as_dict(version_field(crd, version, "schema")).get("openAPIV3Schema")
    return found if isinstance(found, dict) else None
