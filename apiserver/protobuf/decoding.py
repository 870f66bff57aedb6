"""Kubernetes' protobuf request bodies, turned into the JSON dict the same object has as JSON.

The wire form (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the magic `k8s\\x00`, then a
runtime.Unknown — 1 typeMeta {1 apiVersion, 2 kind}, 2 raw (the object's own message),
3 contentEncoding, 4 contentType. The object is decoded with the field table in `messages.py`.

gogo-protobuf writes every non-pointer field, zero or not (an empty `generateName`, `replicas` of a
ScaleSpec, an empty `creationTimestamp`), so zero scalars are dropped as `omitempty` would drop them
from JSON, except for the fields the table marks as pointers or required. Empty non-pointer structs
stay as `{}`, as encoding/json writes them. Pure: bytes in, dict out.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson

from .messages import KINDS, MESSAGES, Field
from .wire import FIXED32, FIXED64, LENGTH, VARINT, WireError, fields, packed_varints, signed

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body cannot be decoded; the message says why, in terms a client author can act on."""


def decode_object(data: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON object the same request would have sent."""
    if not data.startswith(MAGIC):
        raise ProtobufError(f"provided data does not appear to be a protobuf message, expected prefix "
                            f"{list(MAGIC)}")
    try:
        envelope = _fields_by_number(data[len(MAGIC):])
        type_meta = _fields_by_number(_bytes(envelope.get(1, [b""])[-1]))
        api_version = _text(type_meta.get(1, [b""])[-1])
        kind = _text(type_meta.get(2, [b""])[-1])
        encoding = _text(envelope.get(3, [b""])[-1])
        content_type = _text(envelope.get(4, [b""])[-1])
        raw = _bytes(envelope.get(2, [b""])[-1])
    except WireError as exc:
        raise ProtobufError(f"malformed protobuf envelope: {exc}") from exc
    if encoding or content_type not in ("", "application/vnd.kubernetes.protobuf"):
        raise ProtobufError(f"unsupported protobuf content encoding {encoding!r} / type {content_type!r}")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise ProtobufError(f'no kind "{kind}" is registered for version "{api_version}" in kubelab\'s '
                            "protobuf decoder; send the object as JSON")
    try:
        obj = _message(raw, message, "")
    except WireError as exc:
        raise ProtobufError(f"malformed protobuf in {kind}: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, **obj}


def _fields_by_number(data: bytes) -> dict[int, list[Any]]:
    result: dict[int, list[Any]] = {}
    for number, _, value in fields(data):
        result.setdefault(number, []).append(value)
    return result


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise WireError("expected a length-delimited field")
    return value


def _text(value: Any) -> str:
    try:
        return _bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(f"string field is not valid UTF-8: {exc}") from exc


def _message(data: bytes, name: str, path: str) -> dict[str, Any]:
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, wire_type, value in fields(data):
        field = table.get(number)
        if field is None:
            where = f" at {path}" if path else ""
            raise ProtobufError(f"field number {number} of {name}{where} is unknown to kubelab's protobuf "
                                "decoder; send the object as JSON")
        child = f"{path}.{field.json_name}" if path else field.json_name
        if field.inline:
            out.update(_message(_bytes(value), field.type, path))
        elif field.map:
            key, item = _map_entry(_bytes(value), field, child)
            out.setdefault(field.json_name, {})[key] = item
        elif field.repeated:
            items = out.setdefault(field.json_name, [])
            if wire_type == LENGTH and field.type in ("int32", "int64", "bool"):
                items += [_varint(v, field.type) for v in packed_varints(_bytes(value))]
            else:
                items.append(_value(wire_type, value, field, f"{child}[{len(items)}]"))
        else:
            out[field.json_name] = _value(wire_type, value, field, child)
    return {k: v for k, v in out.items() if v is not _DROP and v is not None}


_DROP = object()  # a zero scalar that JSON's omitempty would leave out


def _map_entry(data: bytes, field: Field, path: str) -> tuple[str, Any]:
    entry = _fields_by_number(data)
    key = _text(entry.get(1, [b""])[-1])
    value_type = field.type
    raw = entry.get(2, [b""])[-1]
    if value_type == "string":
        return key, _text(raw)
    if value_type == "bytes":
        return key, base64.b64encode(_bytes(raw)).decode()
    if value_type == "Quantity":
        return key, _quantity(_bytes(raw))
    return key, _message(_bytes(raw), value_type, f"{path}[{key}]")


def _varint(value: int, type_: str) -> int | bool:
    if type_ == "bool":
        return value != 0
    return signed(value, 32 if type_ == "int32" else 64)


def _value(wire_type: int, value: int | bytes, field: Field, path: str) -> Any:
    type_ = field.type
    if type_ in ("int32", "int64", "bool"):
        if wire_type != VARINT or not isinstance(value, int):
            raise ProtobufError(f"{path}: expected a varint for {type_}")
        result: Any = _varint(value, type_)
    elif type_ == "string":
        _expect_length(wire_type, path)
        result = _text(value)
    elif type_ == "bytes":
        _expect_length(wire_type, path)
        result = base64.b64encode(_bytes(value)).decode()
    elif wire_type in (FIXED32, FIXED64):
        raise ProtobufError(f"{path}: unexpected fixed-width value for {type_}")
    else:
        _expect_length(wire_type, path)
        data = _bytes(value)
        if type_ == "Time":
            return _time(data, micro=False)
        if type_ == "MicroTime":
            return _time(data, micro=True)
        if type_ == "IntOrString":
            return _int_or_string(data)
        if type_ == "Quantity":
            return _quantity(data)
        if type_ == "FieldsV1":
            return _fields_v1(data, path)
        return _message(data, type_, path)
    if not field.repeated and not field.keep_zero and result in ("", 0, False):
        return _DROP
    return result


def _expect_length(wire_type: int, path: str) -> None:
    if wire_type != LENGTH:
        raise ProtobufError(f"{path}: expected a length-delimited value")


def _time(data: bytes, *, micro: bool) -> str | None:
    """metav1.Time/MicroTime as a Timestamp {1 seconds, 2 nanos}; an empty message is the zero time,
    which JSON writes as null. Time is RFC 3339 in seconds, MicroTime with microseconds."""
    if not data:
        return None
    parts = _fields_by_number(data)
    seconds = signed(parts.get(1, [0])[-1], 64)
    nanos = signed(parts.get(2, [0])[-1], 32)
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ProtobufError(f"timestamp {seconds} is out of range") from exc
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(data: bytes) -> int | str:
    """intstr.IntOrString {1 type, 2 intVal, 3 strVal}: type 1 is a string."""
    parts = _fields_by_number(data)
    if parts.get(1, [0])[-1] == 1:
        return _text(parts.get(3, [b""])[-1])
    return signed(parts.get(2, [0])[-1], 32)


def _quantity(data: bytes) -> str:
    """resource.Quantity {1 string}: the canonical text, as JSON carries it."""
    return _text(_fields_by_number(data).get(1, [b"0"])[-1]) or "0"


def _fields_v1(data: bytes, path: str) -> Any:
    """metav1.FieldsV1 {1 Raw}: the raw JSON of the field set."""
    raw = _bytes(_fields_by_number(data).get(1, [b"{}"])[-1])
    try:
        return orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError as exc:
        raise ProtobufError(f"{path}: fieldsV1 is not JSON: {exc}") from exc


__all__ = ["MAGIC", "ProtobufError", "decode_object"]
