"""Objects of the kinds CustomResourceDefinitions define: their strategy and their version.

apiextensions-apiserver's customresource strategy in small: generation starts at 1 and grows with every
change of what is not metadata (nor status, when the status subresource is on); with the status
subresource a main write keeps the stored status and a status write changes status only. Objects are
stored in the definition's storage version.

Versions: a definition's versions all use conversion strategy None, under which a version change is the
apiVersion alone. The strategy sees objects in the version it serves; the registry's conversion layer
(apiserver/conversion.py, `rewrite_api_version`) stores them in the storage version and serves them back in
any served version, as it does for events.k8s.io/v1.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubelab.kinds import ResourceType
from kubelab.models import CustomObject, TypedObject
from kubelab.validation import FieldError

from . import celrules, structural
from .strategy import Strategy

# hasBlockingErr: CEL rules are not run on an object whose fields have the wrong types.
_BLOCKED = FieldError("Invalid", "<nil>", None, "some validation rules were not checked because the object was "
                                                "invalid; correct the existing errors to complete validation")


def is_custom(rt: ResourceType) -> bool:
    """Whether `rt` is a kind a CustomResourceDefinition defines (stored under /registry/<group>/<plural>/)."""
    return bool(rt.storage_name)


def _scale_paths(rt: ResourceType) -> dict[str, Any]:
    version = json.loads(rt.definition) if rt.definition else {}
    scale = ((version.get("subresources") or {}).get("scale")) or {}
    return scale if isinstance(scale, dict) else {}


def _steps(path: Any) -> list[str]:
    return [part for part in str(path or "").split(".") if part]


def _lookup(obj: Any, path: Any) -> Any:
    for part in _steps(path):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def custom_scale(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a custom object, read at its definition's specReplicasPath,
    statusReplicasPath and labelSelectorPath (a missing replicas field reads 0)."""
    paths = _scale_paths(rt)
    meta = obj.get("metadata") or {}
    spec_replicas = _lookup(obj, paths.get("specReplicasPath"))
    status_replicas = _lookup(obj, paths.get("statusReplicasPath"))
    status: dict[str, Any] = {"replicas": status_replicas if isinstance(status_replicas, int) else 0}
    selector = _lookup(obj, paths.get("labelSelectorPath")) if paths.get("labelSelectorPath") else None
    if isinstance(selector, str) and selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": spec_replicas if isinstance(spec_replicas, int) else 0}, "status": status}


def with_replicas(obj: dict[str, Any], rt: ResourceType, replicas: int) -> dict[str, Any]:
    """`obj` with `replicas` written at its definition's specReplicasPath (the maps on the way made)."""
    steps = _steps(_scale_paths(rt).get("specReplicasPath")) or ["spec", "replicas"]
    result = copy.deepcopy(obj)
    target = result
    for part in steps[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[steps[-1]] = replicas
    return result


def _content(obj: TypedObject, *, without_status: bool) -> dict[str, Any]:
    data = obj.to_dict()
    for key in ("apiVersion", "kind", "metadata"):
        data.pop(key, None)
    if without_status:
        data.pop("status", None)
    return data


class CustomObjectStrategy(Strategy):
    def __init__(self, rt: ResourceType, *, schema: dict[str, Any] | None = None,
                 deprecation_warning: str | None = None) -> None:
        super().__init__(rt)
        self.has_status = "status" in rt.subresources
        self.schema = schema  # the served version's openAPIV3Schema (structural.py)
        self.rules = celrules.build(schema)  # its x-kubernetes-validations, compiled once
        self.deprecation_warning = deprecation_warning

    def prune_unknown(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Structural pruning: what the version's schema does not specify goes."""
        if self.schema is None:
            return body, []
        return structural.prune(body, self.schema)

    def set_defaults(self, obj: TypedObject) -> None:
        if self.schema is not None:
            structural.apply_defaults(_extra(obj), self.schema)

    def _schema_errors(self, obj: TypedObject) -> list[FieldError]:
        if self.schema is None:
            return []
        data = obj.to_dict()
        return structural.validate(data, self.schema) + structural.list_type_errors(data, self.schema)

    def _rule_errors(self, errs: list[FieldError], new: TypedObject, old: TypedObject | None) -> list[FieldError]:
        """The x-kubernetes-validations errors, after the schema's (transition rules see `old`)."""
        if self.rules is None:
            return errs
        if any(e.type == "TypeInvalid" for e in errs):
            return [*errs, _BLOCKED]
        return errs + self.rules.validate(new.to_dict(), old.to_dict() if old is not None else None)

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        return self._rule_errors(super().validate_create(obj) + self._schema_errors(obj), obj, None)

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        return self._rule_errors(super().validate_update(new, old, subresource) + self._schema_errors(new), new, old)

    def prepare_create(self, obj: TypedObject) -> None:
        super().prepare_create(obj)
        obj.api_version = self.rt.api_version
        obj.metadata.generation = 1
        if self.has_status:
            # With the status subresource, status is written only through it.
            _set(obj, "status", None)

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        nm, om = new.metadata, old.metadata
        nm.uid, nm.creation_timestamp = om.uid, om.creation_timestamp
        nm.deletion_timestamp, nm.deletion_grace_period_seconds = om.deletion_timestamp, om.deletion_grace_period_seconds
        nm.generate_name = om.generate_name if nm.generate_name is None else nm.generate_name
        nm.namespace = om.namespace
        new.kind = self.rt.kind
        new.api_version = self.rt.api_version
        nm.generation = om.generation or 1
        if subresource == "status":
            # A status write changes status only (ResetObjectMetaForStatus and the spec kept).
            new.metadata = om.model_copy(update={"resource_version": nm.resource_version})
            extra = _extra(new)
            status = extra.get("status")
            extra.clear()
            extra.update({k: v for k, v in _extra(old).items() if k != "status"})
            _set(new, "status", status)
            return
        if self.has_status:
            _set(new, "status", _extra(old).get("status"))
        if _content(new, without_status=self.has_status) != _content(old, without_status=self.has_status):
            nm.generation = (om.generation or 1) + 1


def _extra(obj: TypedObject) -> dict[str, Any]:
    """A custom object's open fields (everything but apiVersion, kind and metadata), in place."""
    assert isinstance(obj, CustomObject) and obj.model_extra is not None
    return obj.model_extra


def _set(obj: TypedObject, key: str, value: Any) -> None:
    """Set or drop one of a custom object's open fields."""
    extra = _extra(obj)
    if value is None:
        extra.pop(key, None)
    else:
        extra[key] = value
