"""Structural schemas: what apiextensions-apiserver does with a custom object and its version's openAPIV3Schema.

* `prune`: fields the schema does not specify go (structural pruning), except under
  x-kubernetes-preserve-unknown-fields and, in an x-kubernetes-embedded-resource, apiVersion, kind and
  metadata; the paths pruned are returned for fieldValidation (Strict refuses them, Warn warns).
* `apply_defaults`: `default` values fill absent fields (and null ones that are not nullable), top down.
* `validate`: kube-openapi's checks, worded as kube converts them to field errors
  (kubeOpenAPIResultToFieldErrors): `spec.size: Invalid value: "string": spec.size in body must be of type
  integer: "string"`, Required, Unsupported value (enum), TooLong, TooMany, and the rest as Invalid with
  go-openapi's sentence.

Pure: plain JSON in, plain JSON and field errors out. The root's apiVersion, kind and metadata are the API
server's (ObjectMeta is validated as for every kind), never the schema's.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
import uuid
from datetime import datetime
from typing import Any

from kubelab import validation
from kubelab.validation import FieldError

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
# re.ASCII: \d would take any Unicode digit ("٢٠٢٦-..." is no RFC 3339 date).
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _preserves(schema: dict[str, Any]) -> bool:
    return schema.get("x-kubernetes-preserve-unknown-fields") is True


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- pruning -------------------------------------------------------------------------------------

def prune(obj: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`obj` without the fields its schema does not specify, and their paths (`spec.foo`)."""
    unknown: list[str] = []
    pruned = _prune_object(obj, schema, "", unknown, root=True)
    return pruned, unknown


def _prune(value: Any, schema: Any, path: str, unknown: list[str]) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        return _prune_object(value, schema, path, unknown, root=False)
    if isinstance(value, list):
        items = schema.get("items")
        return [_prune(item, items, f"{path}[{i}]", unknown) for i, item in enumerate(value)]
    return value


def _prune_object(value: dict[str, Any], schema: dict[str, Any], path: str, unknown: list[str], *,
                  root: bool) -> dict[str, Any]:
    props = _props(schema)
    additional = schema.get("additionalProperties")
    keep_meta = root or schema.get("x-kubernetes-embedded-resource") is True
    result: dict[str, Any] = {}
    for key, item in value.items():
        child = _join(path, key)
        if keep_meta and key in _ROOT_FIELDS:
            result[key] = item  # metadata is ObjectMeta's business (and an embedded object's own)
        elif key in props:
            result[key] = _prune(item, props[key], child, unknown)
        elif isinstance(additional, dict):
            result[key] = _prune(item, additional, child, unknown)
        elif additional is True or _preserves(schema):
            result[key] = item
        else:
            unknown.append(child)
    return result


# --- defaulting ------------------------------------------------------------------------------------

def apply_defaults(value: Any, schema: Any) -> Any:
    """`value` with the schema's defaults filled in (structuraldefaulting.Default), top down."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = _props(schema)
        for key, sub in props.items():
            if not isinstance(sub, dict) or "default" not in sub:
                continue
            if key not in value or (value[key] is None and sub.get("nullable") is not True):
                value[key] = copy.deepcopy(sub["default"])
        for key, item in value.items():
            if key in props:
                value[key] = apply_defaults(item, props[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                value[key] = apply_defaults(item, schema["additionalProperties"])
    elif isinstance(value, list):
        return [apply_defaults(item, schema.get("items")) for item in value]
    return value


# --- validation ----------------------------------------------------------------------------------

def json_type(value: Any) -> str:
    """The JSON type go-openapi names a value by."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(value: Any, typ: str) -> bool:
    actual = json_type(value)
    return actual == typ or (typ == "number" and actual == "integer")


def validate(obj: dict[str, Any], schema: dict[str, Any]) -> list[FieldError]:
    """Every field error of `obj` against its version's schema (the root's metadata left to ObjectMeta)."""
    body = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
    root = {**schema, "properties": {k: v for k, v in _props(schema).items() if k not in _ROOT_FIELDS}}
    root["required"] = [r for r in schema.get("required") or [] if r not in _ROOT_FIELDS]
    return _validate(body, root, "")


def list_type_errors(obj: dict[str, Any], schema: dict[str, Any]) -> list[FieldError]:
    """apiextensions' ValidateListSetsAndMaps, run after the schema's own checks: the items of an
    `x-kubernetes-list-type: set` array are unique, and so are the keys (`x-kubernetes-list-map-keys`) of a
    `map` array's items, which must be objects; each value seen again is reported once, at its second index
    (`spec.tags[2]: Duplicate value: "a"`, `spec.ports[1]: Duplicate value: {"name":"http"}`)."""
    return _list_types(obj, schema, "")


def _list_types(value: Any, schema: Any, path: str) -> list[FieldError]:
    if not isinstance(schema, dict):
        return []
    errs: list[FieldError] = []
    if isinstance(value, dict):
        extra = schema.get("additionalProperties")
        props = _props(schema)
        for key, child in value.items():
            if isinstance(extra, dict):
                errs += _list_types(child, extra, f"{path}[{key}]")
            if key in props:
                errs += _list_types(child, props[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type")
        if kind == "set":
            errs += [FieldError("Duplicate", f"{path}[{i}]", _bad_value(value[i])) for i in _repeated(value)]
        elif kind == "map":
            errs += _map_list_errors(value, schema, path)
        for i, item in enumerate(value):
            errs += _list_types(item, schema.get("items"), f"{path}[{i}]")
    return errs


def _map_list_errors(items: list[Any], schema: dict[str, Any], path: str) -> list[FieldError]:
    for i, item in enumerate(items):
        if item is not None and not isinstance(item, dict):
            return [validation.invalid(f"{path}[{i}]", item, "must be an object for an array of list-type map")]
    names = [str(k) for k in schema.get("x-kubernetes-list-map-keys") or []]
    keys = [{name: item[name] for name in names if name in item} if isinstance(item, dict) else {}
            for item in items]
    return [FieldError("Duplicate", f"{path}[{i}]", _bad_value(keys[i])) for i in _repeated(keys)]


def _bad_value(value: Any) -> Any:
    """A duplicate as field.Error prints it: scalars plainly, maps and lists with Go's `%#v` of unstructured
    values (`map[string]interface {}{"name":"http", "port":80}`)."""
    return validation.GoLiteral(_go_sharp_v(value)) if isinstance(value, dict | list) else value


def _go_sharp_v(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{validation.go_quote(str(k))}:{_go_sharp_v(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp_v(v) for v in value) + "}"
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return validation.go_quote(value)
    if isinstance(value, float):
        text = repr(value)
        return text.removesuffix(".0")
    return str(value)


def _repeated(values: list[Any]) -> list[int]:
    """The index of each value's second appearance, in order (validateListSet). Values compare as Go's
    unstructured ones do: by their JSON, so 1 and 1.0 and true differ."""
    seen: dict[str, int] = {}
    found: list[int] = []
    for i, value in enumerate(values):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        seen[text] = seen.get(text, 0) + 1
        if seen[text] == 2:
            found.append(i)
    return found


def _validate(value: Any, schema: Any, path: str) -> list[FieldError]:
    if not isinstance(schema, dict):
        return []
    name = path or "."
    typ = schema.get("type")
    if value is None:
        if schema.get("nullable") is True or (typ is None and not schema.get("x-kubernetes-int-or-string")):
            return []
        shown = "integer,string" if schema.get("x-kubernetes-int-or-string") else typ
        return [FieldError("TypeInvalid", name, "null", f'{name} in body must be of type {shown}: "null"')]
    if schema.get("x-kubernetes-int-or-string") is True:
        if json_type(value) not in ("integer", "string"):
            return [FieldError("TypeInvalid", name, json_type(value),
                               f'{name} in body must be of type integer,string: "{json_type(value)}"')]
    elif isinstance(typ, str) and not _type_ok(value, typ):
        return [FieldError("TypeInvalid", name, json_type(value),
                           f'{name} in body must be of type {typ}: "{json_type(value)}"')]
    errs: list[FieldError] = []
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        errs.append(validation.FieldError("NotSupported", name, value, "supported values: " + ", ".join(
            f'"{v}"' if isinstance(v, str) else _json(v) for v in enum)))
    if isinstance(value, str):
        errs += _validate_string(value, schema, name)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        errs += _validate_number(value, schema, name)
    elif isinstance(value, list):
        errs += _validate_array(value, schema, name, path)
    elif isinstance(value, dict):
        errs += _validate_object(value, schema, name, path)
    return errs


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def _validate_string(value: str, schema: dict[str, Any], name: str) -> list[FieldError]:
    errs: list[FieldError] = []
    max_length, min_length = schema.get("maxLength"), schema.get("minLength")
    if isinstance(max_length, int) and len(value) > max_length:
        errs.append(FieldError("TooLong", name, value, f"may not be more than {max_length} bytes"))
    if isinstance(min_length, int) and len(value) < min_length:
        errs.append(validation.invalid(name, value, f"{name} in body should be at least {min_length} chars long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            # Go's \d, \w and \s are ASCII. (Python's `$` also matches before a final newline and Python
            # backtracks where RE2 does not: both known gaps, see the issue notes.)
            matched = re.search(pattern, value, re.ASCII) is not None
        except re.error:
            matched = True  # a pattern Python cannot compile was refused with the definition or is Go-only
        if not matched:
            errs.append(validation.invalid(name, value, f"{name} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if isinstance(fmt, str) and not _format_ok(value, fmt):
        errs.append(validation.invalid(name, value, f'{name} in body must be of type {fmt}: "{value}"'))
    return errs


def _format_ok(value: str, fmt: str) -> bool:
    """The string formats kube-openapi's registry checks (the common ones; others pass)."""
    try:
        if fmt == "date-time":
            return _DATE_TIME.fullmatch(value) is not None
        if fmt == "date":
            return _DATE.fullmatch(value) is not None and bool(datetime.strptime(value, "%Y-%m-%d"))
        if fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _validate_number(value: float, schema: dict[str, Any], name: str) -> list[FieldError]:
    errs: list[FieldError] = []
    shown = int(value) if isinstance(value, float) and value.is_integer() else value
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    if isinstance(minimum, int | float):
        if schema.get("exclusiveMinimum") is True and value <= minimum:
            errs.append(validation.invalid(name, shown, f"{name} in body should be greater than {_num(minimum)}"))
        elif value < minimum:
            errs.append(validation.invalid(name, shown, f"{name} in body should be greater than or equal to "
                                                        f"{_num(minimum)}"))
    if isinstance(maximum, int | float):
        if schema.get("exclusiveMaximum") is True and value >= maximum:
            errs.append(validation.invalid(name, shown, f"{name} in body should be less than {_num(maximum)}"))
        elif value > maximum:
            errs.append(validation.invalid(name, shown, f"{name} in body should be less than or equal to "
                                                        f"{_num(maximum)}"))
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and multiple and (value / multiple) % 1:
        errs.append(validation.invalid(name, shown, f"{name} in body should be a multiple of {_num(multiple)}"))
    return errs


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _validate_array(value: list[Any], schema: dict[str, Any], name: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    max_items, min_items = schema.get("maxItems"), schema.get("minItems")
    if isinstance(max_items, int) and len(value) > max_items:
        errs.append(FieldError("TooMany", name, len(value), f"must have at most {max_items} items"))
    if isinstance(min_items, int) and len(value) < min_items:
        errs.append(validation.invalid(name, len(value), f"{name} in body should have at least {min_items} items"))
    items = schema.get("items")
    for i, item in enumerate(value):
        errs += _validate(item, items, f"{path}[{i}]")
    return errs


def _validate_object(value: dict[str, Any], schema: dict[str, Any], name: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in schema.get("required") or []:
        if key not in value:
            errs.append(validation.required(_join(path, key), ""))
    if schema.get("x-kubernetes-embedded-resource") is True:
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                errs.append(validation.required(_join(path, key), "must not be empty"))
    max_props, min_props = schema.get("maxProperties"), schema.get("minProperties")
    if isinstance(max_props, int) and len(value) > max_props:
        errs.append(FieldError("TooMany", name, len(value), f"must have at most {max_props} items"))
    if isinstance(min_props, int) and len(value) < min_props:
        errs.append(validation.invalid(name, len(value), f"{name} in body should have at least {min_props} "
                                                         "properties"))
    props = _props(schema)
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if key in props:
            errs += _validate(item, props[key], _join(path, key))
        elif isinstance(additional, dict):
            errs += _validate(item, additional, _join(path, key))
    return errs
