"""Go's encoding/json as kube's error messages show it: the name of a JSON value's type in an
UnmarshalTypeError ("json: cannot unmarshal number into Go struct field ... of type string"). Pure."""

from __future__ import annotations

from typing import Any


def type_name(value: Any) -> str:
    """UnmarshalTypeError.Value for a decoded JSON value: bool, number, string, array, object or null."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


__all__ = ["type_name"]
