"""What kube-apiserver says when a request body does not decode into the kind its URL names.

Its words come from the Go decoder (`transformDecodeError` in the handlers, encoding/json's
UnmarshalTypeError, the scheme's conversion errors), and kubectl prints them verbatim:

    Error from server (BadRequest): error when creating "svc.yaml": Service in version "v1" cannot be
    handled as a Service: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port
    of type int32

so kubelab rebuilds them from the pydantic error and the model's annotations.
"""

from __future__ import annotations

import base64
import dataclasses
import types
import typing
from typing import Any

import orjson
import pydantic

from kubelab import kinds, validation
from kubelab.kinds import ResourceType

from .. import errors, gojson

# Integer fields that are int64 in the Go types; every other integer field of the modelled kinds is int32.
_INT64_FIELDS = {"terminationGracePeriodSeconds", "activeDeadlineSeconds", "tolerationSeconds", "generation",
                 "deletionGracePeriodSeconds", "observedGeneration"}
# The Go package of the external types (`v1.Pod`), and of the internal ones conversion targets (`core.Pod`).
_LEGACY_SCHEME = "pkg/api/legacyscheme/scheme.go:30"
_REGISTERED = {(rt.api_version, rt.kind) for rt in (*kinds.BUILTIN, kinds.EVENTS_V1)} | {("v1", "Binding")}


# Kinds of different groups kube decodes into one internal type (events.k8s.io/v1 Event is core.Event).
_SHARED_INTERNAL = {(kinds.EVENTS.api_version, "Event"), (kinds.EVENTS_V1.api_version, "Event")}


def _internal_package(group: str) -> str:
    return group.split(".")[0] if group else "core"


def _version(group_version: str) -> str:
    return group_version.rsplit("/", 1)[-1]


def kind_mismatch(rt: ResourceType, api_version: str, kind: str) -> errors.StatusError:
    """The body names another kind or version than the URL. `api_version`/`kind` are the body's, with
    missing parts filled from the URL as the decoder does (gvkWithDefaults)."""
    version = _version(api_version)
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    if (api_version, kind) not in _REGISTERED:
        reason = f'no kind "{kind}" is registered for version "{api_version}" in scheme "{_LEGACY_SCHEME}"'
    elif kind == rt.kind and (group == rt.group or {(api_version, kind), (rt.api_version, rt.kind)} <= _SHARED_INTERNAL):
        # Same kind, another version (or another group whose objects convert to the same internal type, as
        # core/v1 and events.k8s.io/v1 Events do): it decodes, then the handler refuses the group version.
        return errors.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                  f"API version ({rt.api_version})")
    else:
        reason = f"converting ({version}.{kind}) to ({_internal_package(rt.group)}.{rt.kind}): unknown conversion"
    return errors.bad_request(f'{kind} in version "{version}" cannot be handled as a {rt.kind}: {reason}')


def check_kind(rt: ResourceType, body: Any) -> dict[str, Any]:
    """The body as the object the URL names, or the decoder's refusal: not an object, or another kind
    or version (missing parts come from the URL, as the decoder's gvkWithDefaults fills them)."""
    if not isinstance(body, dict):
        raise not_an_object(rt, body)
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind is not None or api_version is not None:
        data_gv, data_kind = api_version or rt.api_version, kind or rt.kind
        if (data_gv, data_kind) != (rt.api_version, rt.kind):
            if rt.storage_name:
                raise custom_mismatch(rt, str(data_gv), str(data_kind), body)
            raise kind_mismatch(rt, str(data_gv), str(data_kind))
    return body


def custom_mismatch(rt: ResourceType, api_version: str, kind: str, body: dict[str, Any]) -> errors.StatusError:
    """A custom object's body of another version or kind than the URL's. apiextensions decodes any
    apiVersion and kind into an unstructured object (no scheme to say "no kind is registered"); the handler
    then refuses another group/version (AcceptsGroupVersion), and the validator's ValidateTypeMeta another
    kind (kube's TestForProperValidationErrors: `SomethingElse.mygroup.example.com "foo" is invalid: kind:
    Invalid value: "SomethingElse": must be WishIHadChosenNoxu`)."""
    if api_version != rt.api_version:
        return errors.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                  f"API version ({rt.api_version})")
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return errors.invalid(dataclasses.replace(rt, kind=kind), name if isinstance(name, str) else "",
                          [validation.invalid("kind", kind, f"must be {rt.kind}")])


def to_model(rt: ResourceType, body: dict[str, Any]) -> Any:
    """`rt.model` from a body, or encoding/json's type error for the first field of the wrong type."""
    try:
        return rt.model.model_validate(body)
    except pydantic.ValidationError as exc:
        raise type_error(rt, exc) from exc


def not_an_object(rt: ResourceType, body: Any) -> errors.StatusError:
    """A body that is a list, string, number or null: there is no kind to read."""
    summary = orjson.dumps(body).decode()  # summarizeData: the first 30 bytes of the body
    summary = summary if len(summary) <= 30 else summary[:30] + " ..."
    return errors.bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): couldn't get "
                              f"version/kind; json parse error: json: cannot unmarshal {gojson.type_name(body)} into Go "
                              f"value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; "
                              f"Kind string \"json:\\\"kind,omitempty\\\"\" }} ({summary})")


def type_error(rt: ResourceType, exc: pydantic.ValidationError) -> errors.StatusError:
    """encoding/json's UnmarshalTypeError for the first field that has the wrong JSON type."""
    first = exc.errors()[0]
    struct, path, go_type = _locate(rt.model, first["loc"])
    value = first.get("input")
    what = gojson.type_name(value)
    if what == "number":
        what = f"number {value}"
    where = f"Go struct field {struct}.{'.'.join(path)}" if path else "Go value"
    return errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: '
                              f"cannot unmarshal {what} into {where} of type {go_type}")




def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _go_type(annotation: Any, name: str) -> str:
    annotation = _unwrap_optional(annotation)
    origin = typing.get_origin(annotation)
    if _is_model(annotation):
        return f"v1.{annotation.__name__}"
    if origin in (typing.Union, types.UnionType):
        return "intstr.IntOrString"  # the only non-optional union in the models
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return "[]" + _go_type(item, name)
    if origin is dict:
        _, value = typing.get_args(annotation) or (str, Any)
        return f"map[string]{_go_type(value, name)}"
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "int64" if name in _INT64_FIELDS else "int32"
    if annotation is str:
        return "string"
    return "interface {}"


def _locate(model: type[pydantic.BaseModel], loc: tuple[int | str, ...]) -> tuple[str, list[str], str]:
    """Walk the models along a pydantic error location: the innermost Go struct's name, the JSON path
    without list indices or map keys (as Go prints it), and the Go type expected there."""
    struct, path = model.__name__, []
    current: Any = model
    name = ""
    for part in loc:
        if _is_model(current):
            field = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
            if field is None:
                break
            struct = current.__name__
            name = field.alias or str(part)
            path.append(name)
            current = _unwrap_optional(field.annotation)
            continue
        origin = typing.get_origin(current)
        if origin is list:
            current = _unwrap_optional((typing.get_args(current) or (Any,))[0])
        elif origin is dict:
            current = _unwrap_optional((typing.get_args(current) or (str, Any))[1])
        else:
            break  # a union member tag (`int`, `str`) or a validator's name: the field is reached
    return struct, path, _go_type(current, name)


# --- []byte fields: base64 as Go's encoding/json decodes it --------------------------------------

_B64_ALPHABET = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


class Base64Error(ValueError):
    """base64.CorruptInputError: its text is what kube puts after "cannot be handled as a Secret: "."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")


def go_base64(text: str) -> str:
    """A []byte field (Secret data, ConfigMap binaryData) as kube-apiserver stores and returns it:
    decoded as Go's base64.StdEncoding.Decode does (line breaks skipped anywhere, padding required,
    bits left over after the last character ignored), then encoded canonically (one line, padded).
    Raises Base64Error with the offset Go reports."""
    out = bytearray()
    data = text.encode("utf-8", "surrogatepass")
    n, si = len(data), 0
    while si < n:
        quantum: list[int] = []
        while len(quantum) < 4:
            if si == n:
                if not quantum:
                    return _encoded(out)
                raise Base64Error(si - len(quantum))  # StdEncoding pads: a short last quantum is corrupt
            ch = data[si]
            si += 1
            value = _B64_ALPHABET.get(chr(ch)) if ch < 128 else None
            if value is not None:
                quantum.append(value)
                continue
            if ch in (0x0A, 0x0D):
                continue
            if ch != 0x3D or len(quantum) < 2:  # not "=", or "=" where at least two characters must be
                raise Base64Error(si - 1)
            if len(quantum) == 2:  # "==" expected; line breaks may come between the two
                while si < n and data[si] in (0x0A, 0x0D):
                    si += 1
                if si == n:
                    raise Base64Error(n)
                if data[si] != 0x3D:
                    raise Base64Error(si - 1)
                si += 1
            while si < n and data[si] in (0x0A, 0x0D):
                si += 1
            if si < n:  # anything after the padding
                raise Base64Error(si)
            break
        bits = 0
        for value in quantum:
            bits = bits << 6 | value
        bits <<= 6 * (4 - len(quantum))
        out += bits.to_bytes(3, "big")[:len(quantum) - 1]
    return _encoded(out)


def _encoded(data: bytearray) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def canonical_bytes(values: dict[str, str], kind: str) -> dict[str, str]:
    """A map[string][]byte field of a v1 `kind`, canonical (go_base64); a value that does not decode is
    the 400 kube-apiserver answers: `Secret in version "v1" cannot be handled as a Secret: illegal base64
    data at input byte 4`."""
    try:
        return {key: go_base64(value) for key, value in values.items()}
    except Base64Error as exc:
        raise errors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {exc}') from None
