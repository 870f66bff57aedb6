"""apiextensions.k8s.io/v1 CustomResourceDefinitions: defaults, validation and status as apiextensions-apiserver
keeps them, and the ResourceTypes an Established definition serves.

Validation follows apiextensions/validation (ValidateCustomResourceDefinition and its update twin) with its
words; the definition's strategy (registry/customresourcedefinition/strategy.go) sets generation, keeps status
off main writes and storedVersions current; its REST Delete marks the definition with the
customresourcecleanup.apiextensions.k8s.io finalizer and a Terminating condition, and the finalizer controller
(apiserver/apiextensions.py) deletes the objects before it lets the definition go. Pure: no I/O here.
"""

from __future__ import annotations

import re
from typing import Any

from kubelab import timeutil, validation
from kubelab.customresources import (
    as_dict,
    as_list,
    is_condition_true,
    scale_of_version,
    spec_of,
    storage_version,
    versions_of,
)
from kubelab.models import CustomResourceDefinition, TypedObject
from kubelab.validation import FieldError

from ..storage import Txn
from . import celrules
from .strategy import Strategy

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
# validateAPIApproval: groups under these suffixes are Kubernetes' own and need the approval annotation.
_PROTECTED_SUFFIXES = (".k8s.io", ".kubernetes.io")
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_PRINTER_TYPES = ("boolean", "date", "integer", "number", "string")
_PRINTER_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")


def with_condition(status: dict[str, Any], new: dict[str, Any], now: str) -> dict[str, Any]:
    """SetCRDCondition: replace the condition of the same type, keeping its lastTransitionTime when the
    status did not change."""
    conditions = [c for c in as_list(status.get("conditions")) if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    entry = {"type": new["type"], "status": new["status"],
             "lastTransitionTime": old.get("lastTransitionTime") if old and old.get("status") == new["status"]
             else now, "reason": new.get("reason", ""), "message": new.get("message", "")}
    if old is None:
        conditions.append(entry)
    else:
        conditions[conditions.index(old)] = entry
    return {**status, "conditions": conditions}


# --- validation ----------------------------------------------------------------------------------

def _label_errors(path: str, value: Any, *, mixed_case: bool = False) -> list[FieldError]:
    text = value if isinstance(value, str) else str(value)
    problems = validation.dns1035_label_errors(text.lower() if mixed_case else text)
    if not problems:
        return []
    detail = ",".join(problems)
    return [validation.invalid(path, value, f"may have mixed case, but should otherwise match: {detail}"
                               if mixed_case else detail)]


def validate_names(names: dict[str, Any], path: str) -> list[FieldError]:
    """ValidateCustomResourceDefinitionNames."""
    errs: list[FieldError] = []
    for key in ("plural", "singular"):
        if names.get(key):
            errs += _label_errors(f"{path}.{key}", names[key])
    for key in ("kind", "listKind"):
        if names.get(key):
            errs += _label_errors(f"{path}.{key}", names[key], mixed_case=True)
    for i, short in enumerate(as_list(names.get("shortNames"))):
        errs += _label_errors(f"{path}.shortNames[{i}]", short)
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        errs.append(validation.invalid(f"{path}.listKind", names["listKind"], "kind and listKind may not be the same"))
    for i, category in enumerate(as_list(names.get("categories"))):
        errs += _label_errors(f"{path}.categories[{i}]", category)
    return errs


def validate_schema(schema: dict[str, Any], path: str, *, root: bool = True, uncorrelatable: str | None = None
                    ) -> list[FieldError]:
    """The structural checks kubelab makes of an openAPIV3Schema: every specified field has a type (at
    the root too), types are OpenAPI v3's, uniqueItems is refused, properties and additionalProperties
    exclude each other; then each node's x-kubernetes-validations (celrules.py), compiled when nothing else
    is wrong at or below it. `uncorrelatable` is the list below which oldSelf has no old value to mean
    (items of a list that is not a map-type list)."""
    errs: list[FieldError] = []
    typ = schema.get("type")
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    if typ is None or typ == "":
        if root:
            errs.append(validation.required(f"{path}.type", "must not be empty at the root"))
        elif not int_or_string and not preserve:
            errs.append(validation.required(f"{path}.type", "must not be empty for specified object fields"))
    elif typ not in _OPENAPI_TYPES:
        errs.append(validation.not_supported(f"{path}.type", typ, list(_OPENAPI_TYPES)))
    elif root and typ != "object":
        errs.append(validation.invalid(f"{path}.type", typ, "must be object at the root"))
    if schema.get("uniqueItems") is True:
        errs.append(validation.forbidden(f"{path}.uniqueItems", "uniqueItems cannot be set to true since the "
                                                                "runtime complexity becomes quadratic"))
    props = as_dict(schema.get("properties"))
    additional = schema.get("additionalProperties")
    if props and (additional is False or isinstance(additional, dict)):
        errs.append(validation.forbidden(f"{path}.additionalProperties",
                                         "additionalProperties and properties are mutual exclusive"))
    for name, sub in props.items():
        if isinstance(sub, dict):
            errs += validate_schema(sub, f"{path}.properties[{name}]", root=False, uncorrelatable=uncorrelatable)
    if isinstance(additional, dict):
        errs += validate_schema(additional, f"{path}.additionalProperties", root=False,
                                uncorrelatable=uncorrelatable)
    items = schema.get("items")
    if isinstance(items, dict):
        correlatable = schema.get("x-kubernetes-list-type") == "map"
        errs += validate_schema(items, f"{path}.items", root=False,
                                uncorrelatable=uncorrelatable or (None if correlatable else path))
    elif typ == "array":
        errs.append(validation.required(f"{path}.items", "must be specified"))
    errs += celrules.definition_errors(schema, path, root=root, uncorrelatable=uncorrelatable,
                                       compile_rules=not errs)
    return errs


def _validate_version(version: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    schema = as_dict(version.get("schema")).get("openAPIV3Schema")
    if not isinstance(schema, dict):
        errs.append(validation.required(f"{path}.schema.openAPIV3Schema", "schemas are required"))
    else:
        errs += validate_schema(schema, f"{path}.schema.openAPIV3Schema")
    scale = scale_of_version(version)
    if scale is not None:
        spath = f"{path}.subresources.scale"
        for key in ("specReplicasPath", "statusReplicasPath"):
            value = scale.get(key)
            if not value:
                errs.append(validation.required(f"{spath}.{key}", ""))
            elif not _simple_path(value):
                errs.append(validation.invalid(f"{spath}.{key}", value, "should be a json path under either "
                                                                        f"`{'.spec' if key == 'specReplicasPath' else '.status'}`"))
    for i, column in enumerate(as_list(version.get("additionalPrinterColumns"))):
        errs += _validate_column(as_dict(column), f"{path}.additionalPrinterColumns[{i}]")
    return errs


def _simple_path(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"(\.[A-Za-z0-9_-]+)+", value) is not None


def _validate_column(column: dict[str, Any], path: str) -> list[FieldError]:
    """ValidateCustomResourceColumnDefinition."""
    errs: list[FieldError] = []
    if not column.get("name"):
        errs.append(validation.required(f"{path}.name", ""))
    if not column.get("type"):
        errs.append(validation.required(f"{path}.type", 'must be one of "boolean", "date", "integer", "number", '
                                                        '"string"'))
    elif column["type"] not in _PRINTER_TYPES:
        errs.append(validation.not_supported(f"{path}.type", column["type"], list(_PRINTER_TYPES)))
    if column.get("format") and column["format"] not in _PRINTER_FORMATS:
        errs.append(validation.not_supported(f"{path}.format", column["format"], list(_PRINTER_FORMATS)))
    if not column.get("jsonPath"):
        errs.append(validation.required(f"{path}.jsonPath", ""))
    return errs


def validate_spec(spec: dict[str, Any]) -> list[FieldError]:
    """validateCustomResourceDefinitionSpec, with v1's rules (a schema per version, pruning)."""
    errs: list[FieldError] = []
    group = spec.get("group")
    if not group:
        errs.append(validation.required("spec.group", ""))
    elif problems := validation.dns1123_subdomain_errors(str(group)):
        errs.append(validation.invalid("spec.group", group, ",".join(problems)))
    elif len(str(group).split(".")) < 2:
        errs.append(validation.invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope")
    if not scope:
        errs.append(validation.required("spec.scope", ""))
    elif scope not in ("Cluster", "Namespaced"):
        errs.append(validation.not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    versions = versions_of(spec)
    seen: set[str] = set()
    unique = True
    for i, version in enumerate(versions):
        name = version.get("name")
        if str(name) in seen:
            unique = False
        seen.add(str(name))
        errs += _label_errors(f"spec.versions[{i}].name", name if name is not None else "")
        errs += _validate_version(version, f"spec.versions[{i}]")
    if not unique:
        errs.append(validation.invalid("spec.versions", as_list(spec.get("versions")), "must contain unique version names"))
    if sum(1 for v in versions if v.get("storage") is True) != 1:
        errs.append(validation.invalid("spec.versions", as_list(spec.get("versions")),
                                       "must have exactly one version marked as storage version"))
    names = as_dict(spec.get("names"))
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            errs.append(validation.required(f"spec.names.{key}", ""))
    errs += validate_names(names, "spec.names")
    conversion = as_dict(spec.get("conversion"))
    strategy = conversion.get("strategy")
    if strategy not in ("None", "Webhook"):
        errs.append(validation.not_supported("spec.conversion.strategy", strategy, ["None", "Webhook"]))
    elif strategy == "Webhook":
        # Conversion webhooks are not served: say so instead of storing a definition whose versions differ.
        errs.append(validation.forbidden("spec.conversion.strategy", "Webhook conversion is not supported by kubelab"))
    if spec.get("preserveUnknownFields") is True:
        errs.append(validation.invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                                       "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema "
                                       "instead"))
    return errs


def validate_stored_versions(stored: list[Any], versions: list[dict[str, Any]]) -> list[FieldError]:
    """ValidateCustomResourceDefinitionStoredVersions."""
    path = "status.storedVersions"
    if not stored:
        return [validation.invalid(path, stored, "must have at least one stored version")]
    errs: list[FieldError] = []
    remaining = {str(v): i for i, v in enumerate(stored)}
    for version in versions:
        if version.get("storage") is True and str(version.get("name")) not in remaining:
            errs.append(validation.invalid(path, version, f"must have the storage version {version.get('name')}"))
        remaining.pop(str(version.get("name")), None)
    errs += [validation.invalid(f"{path}[{i}]", v, "must appear in spec.versions") for v, i in remaining.items()]
    return errs


def _approval_errors(crd: CustomResourceDefinition) -> list[FieldError]:
    group = str(spec_of(crd.to_dict()).get("group") or "")
    if not group.endswith(_PROTECTED_SUFFIXES) and group not in ("k8s.io", "kubernetes.io"):
        return []
    if (crd.metadata.annotations or {}).get(APPROVAL_ANNOTATION):
        return []
    return [validation.required(f"metadata.annotations[{APPROVAL_ANNOTATION}]",
                                f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", see '
                                "https://github.com/kubernetes/enhancements/pull/1111")]


# --- the strategy ----------------------------------------------------------------------------------

class CustomResourceDefinitionStrategy(Strategy):
    def set_defaults(self, obj: TypedObject) -> None:
        """SetDefaults_CustomResourceDefinitionSpec: singular and listKind from kind, conversion None."""
        assert isinstance(obj, CustomResourceDefinition)
        if not isinstance(obj.spec, dict):
            return
        spec = obj.spec
        names = spec.get("names")
        if isinstance(names, dict) and isinstance(names.get("kind"), str):
            if not names.get("singular"):
                names["singular"] = names["kind"].lower()
            if not names.get("listKind"):
                names["listKind"] = names["kind"] + "List"
        if spec.get("conversion") is None:
            spec["conversion"] = {"strategy": "None"}

    def prepare_create(self, obj: TypedObject) -> None:
        """PrepareForCreate: status starts empty (the naming controller fills it), generation 1, the
        storage version is the first stored version."""
        super().prepare_create(obj)
        assert isinstance(obj, CustomResourceDefinition)
        obj.metadata.generation = 1
        stored = storage_version(obj.spec or {})
        obj.status = {"conditions": [], "acceptedNames": {"plural": "", "kind": ""},
                      "storedVersions": [stored] if stored else []}

    def validate_create(self, obj: TypedObject) -> list[FieldError]:
        assert isinstance(obj, CustomResourceDefinition)
        spec = obj.spec or {}
        errs = self.validate_meta(obj)
        names = as_dict(spec.get("names"))
        name = obj.metadata.name or ""
        if name and name != f"{names.get('plural', '')}.{spec.get('group', '')}":
            errs.append(validation.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
        errs += validate_spec(spec)
        errs += validate_names(as_dict((obj.status or {}).get("acceptedNames")), "status.acceptedNames")
        errs += validate_stored_versions(as_list((obj.status or {}).get("storedVersions")), versions_of(spec))
        errs += _approval_errors(obj)
        return errs

    def prepare_update(self, new: TypedObject, old: TypedObject, subresource: str | None) -> None:
        """PrepareForUpdate: a spec change bumps generation; the storage version joins storedVersions."""
        super().prepare_update(new, old, subresource)
        assert isinstance(new, CustomResourceDefinition) and isinstance(old, CustomResourceDefinition)
        new.metadata.generation = old.metadata.generation or 1
        if subresource == "status":
            return
        if new.spec != old.spec:
            new.metadata.generation += 1
        status = dict(new.status or {})
        stored = [str(v) for v in as_list(status.get("storedVersions"))]
        version = storage_version(new.spec or {})
        if version and version not in stored:
            status["storedVersions"] = [*stored, version]
            new.status = status

    def validate_update(self, new: TypedObject, old: TypedObject, subresource: str | None = None
                        ) -> list[FieldError]:
        assert isinstance(new, CustomResourceDefinition) and isinstance(old, CustomResourceDefinition)
        errs = self.validate_meta_update(new, old)
        status = new.status or {}
        errs += validate_names(as_dict(status.get("acceptedNames")), "status.acceptedNames")
        if subresource == "status":
            return errs
        spec, old_spec = new.spec or {}, old.spec or {}
        errs += validate_spec(spec)
        if is_condition_true(old.to_dict(), "Established"):
            # These decide the storage and cannot change once objects may exist.
            if spec.get("scope") != old_spec.get("scope"):
                errs.append(validation.invalid("spec.scope", spec.get("scope"), "field is immutable"))
            if as_dict(spec.get("names")).get("kind") != as_dict(old_spec.get("names")).get("kind"):
                errs.append(validation.invalid("spec.names.kind", as_dict(spec.get("names")).get("kind"),
                                               "field is immutable"))
        if spec.get("group") != old_spec.get("group"):
            errs.append(validation.invalid("spec.group", spec.get("group"), "field is immutable"))
        if as_dict(spec.get("names")).get("plural") != as_dict(old_spec.get("names")).get("plural"):
            errs.append(validation.invalid("spec.names.plural", as_dict(spec.get("names")).get("plural"),
                                           "field is immutable"))
        errs += validate_stored_versions(as_list(status.get("storedVersions")), versions_of(spec))
        errs += _approval_errors(new)
        return errs

    def mark_for_deletion(self, obj: TypedObject, options: dict[str, Any]) -> Txn | None:
        """The definition's REST Delete: the first DELETE adds the cleanup finalizer and the Terminating
        condition; the finalizer controller deletes the objects, then removes the finalizer."""
        assert isinstance(obj, CustomResourceDefinition)
        meta = obj.metadata
        if not meta.deletion_timestamp:
            if CLEANUP_FINALIZER not in (meta.finalizers or []):
                meta.finalizers = [*(meta.finalizers or []), CLEANUP_FINALIZER]
            obj.status = with_condition(dict(obj.status or {}), {
                "type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
                "message": "CustomResourceDefinition marked for deletion; instance deletion pending"},
                timeutil.rfc3339())
        return super().mark_for_deletion(obj, options)


