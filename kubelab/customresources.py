"""What a CustomResourceDefinition defines, read from its JSON: the resources it serves and where they are stored.

Shared by the API server (which serves them, apiserver/apiextensions.py) and the controllers (the garbage
collector and the namespace controller find custom objects through it). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from . import models
from .kinds import ResourceType

# The verbs apiextensions' discovery controller lists for the kind of a definition being deleted, in its order.
TERMINATING_VERBS = ("delete", "deletecollection", "get", "list", "watch")


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
    served = tuple(_resource_type(crd, version, names) for version in versions_of(spec_of(crd))
                   if version.get("served") is True and isinstance(version.get("name"), str))
    if is_condition_true(crd, "Terminating"):
        # customresource_discovery_controller.go: a terminating definition's kind stays in discovery (legacy
        # and aggregated), listed with only the verbs it still takes; its subresources keep theirs.
        return tuple(dataclasses.replace(rt, discovery_verbs=TERMINATING_VERBS) for rt in served)
    return served


def storage_type(crd: dict[str, Any]) -> ResourceType | None:
    """The resource in the storage version, served or not: what the cleanup finalizer lists and deletes."""
    spec = spec_of(crd)
    version = next((v for v in versions_of(spec) if v.get("storage") is True), None)
    names = as_dict(spec.get("names"))
    if version is None or not names.get("plural"):
        return None
    return _resource_type(crd, version, names)


def stored_as(crd: dict[str, Any]) -> ResourceType | None:
    """The resource its served versions are stored as: the storage version under the accepted names (the
    served one itself when the storage version is served), whose etcd prefix and watch cache they share."""
    names = as_dict(as_dict(crd.get("status")).get("acceptedNames"))
    version = next((v for v in versions_of(spec_of(crd)) if v.get("storage") is True), None)
    if version is None or not (names.get("plural") and names.get("kind")):
        return None
    return _resource_type(crd, version, names)


def deprecation_warning(crd: dict[str, Any], version: str) -> str | None:
    """The warning a request to a deprecated version gets: its deprecationWarning, else apiextensions' default,
    which names the newest served, undeprecated version of equal or greater stability, if there is one
    (`example.com/v1beta1 Gizmo is deprecated; use example.com/v1 Gizmo`). None for a version not deprecated."""
    spec = spec_of(crd)
    found = next((v for v in versions_of(spec) if v.get("name") == version), None)
    if found is None or found.get("deprecated") is not True:
        return None
    if isinstance(found.get("deprecationWarning"), str):
        return str(found["deprecationWarning"])
    group, kind = spec.get("group"), as_dict(spec.get("names")).get("kind")
    message = f"{group}/{version} {kind} is deprecated"
    better = [str(v.get("name")) for v in versions_of(spec) if v.get("served") is True
              and v.get("deprecated") is not True and compare_versions(str(v.get("name")), version) > 0]
    if better:
        message += f"; use {group}/{max(better, key=version_priority)} {kind}"
    return message


def version_priority(name: str) -> tuple[int, int, int, tuple[int, ...]]:
    """A sort key by which kube orders versions (apimachinery's CompareKubeAwareVersionStrings): GA over beta
    over alpha, then the higher major, then the higher minor (v2 > v1 > v1beta2 > v1beta1 > v1alpha1); names
    not of that shape (`v1.0`, `foo`) come after every kube-like one, in alphabetical order. Higher is first."""
    parsed = _kube_version(name)
    if parsed is None:
        # Below every kube-like name; among themselves "a" before "b": the negated code points sort so.
        return (0, 0, 0, tuple(-ord(c) for c in name) + (1,))
    major, stability, minor = parsed
    return (1, stability, major, (minor,))


def compare_versions(a: str, b: str) -> int:
    """Positive when `a` comes before `b` in kube's version priority, negative after, 0 when equal."""
    ka, kb = version_priority(a), version_priority(b)
    return (ka > kb) - (ka < kb)


def by_priority(names: list[str]) -> list[str]:
    """Versions in kube's priority order, the preferred one first."""
    return sorted(names, key=version_priority, reverse=True)


_DIGITS = frozenset("0123456789")  # Go's \\d: ASCII digits only


def _kube_version(name: str) -> tuple[int, int, int] | None:
    """(major, stability 2 GA / 1 beta / 0 alpha, minor) of `v<digits>[(alpha|beta)<digits>]`."""
    if not name.startswith("v") or len(name) < 2 or name[1] not in _DIGITS:
        return None
    i = 1
    while i < len(name) and name[i] in _DIGITS:
        i += 1
    major, rest = int(name[1:i]), name[i:]
    if not rest:
        return major, 2, 0
    for stability, word in ((1, "beta"), (0, "alpha")):
        tail = rest[len(word):]
        if rest.startswith(word) and tail and all(c in _DIGITS for c in tail):
            return major, stability, int(tail)
    return None


def version_field(crd: dict[str, Any], version: str, name: str) -> Any:
    """One field of one version of a definition (`additionalPrinterColumns`, `schema`), or None."""
    return next((each.get(name) for each in versions_of(spec_of(crd)) if each.get("name") == version), None)


def version_schema(crd: dict[str, Any], version: str) -> dict[str, Any] | None:
    """The openAPIV3Schema of one version of a definition."""
    found = as_dict(version_field(crd, version, "schema")).get("openAPIV3Schema")
    return found if isinstance(found, dict) else None
