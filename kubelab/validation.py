"""Field validation in kube-apiserver's words: names, label keys and values, ports, and the error type.

`FieldError` renders exactly as apimachinery's `field.Error` does, so a 422 from kubelab reads like
one from a real cluster: `spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
IANA_SVC_NAME_FMT = "^[-a-z0-9]+$"

_DNS1123_LABEL = re.compile(f"^{DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = re.compile(f"^{DNS1035_LABEL_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")

DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                     "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
                     f"regex used for validation is '{DNS1123_LABEL_FMT}')")
DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                         "'-' or '.', and must start and end with an alphanumeric character (e.g. "
                         f"'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')")
DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
                     "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                     f"'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')")
QUALIFIED_NAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                      "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                      f"used for validation is '{QUALIFIED_NAME_FMT}')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                   "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                   f"'my_value',  or '12345', regex used for validation is '{LABEL_VALUE_FMT}')")


class GoLiteral(str):
    """A value already spelled as Go prints it (`core.ServicePort{...}`); go_repr leaves it alone."""


def go_repr(value: Any) -> str:
    """How Go's `%#v`-ish formatting in field.Error prints a bad value."""
    if isinstance(value, GoLiteral):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(json.dumps(v) for v in value) + "}"
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


_REASONS = {
    "Invalid": "FieldValueInvalid",
    "Required": "FieldValueRequired",
    "NotSupported": "FieldValueNotSupported",
    "Duplicate": "FieldValueDuplicate",
    "Forbidden": "FieldValueForbidden",
    "TooLong": "FieldValueTooLong",
    "TooMany": "FieldValueTooMany",
}


@dataclass(frozen=True)
class FieldError:
    type: str  # Invalid | Required | NotSupported | Duplicate | Forbidden | TooLong
    field: str
    value: Any = None
    detail: str = ""

    @property
    def reason(self) -> str:
        return _REASONS[self.type]

    @property
    def body(self) -> str:
        """The message without the field path (a Status cause's `message`)."""
        if self.type == "Invalid":
            text = f"Invalid value: {go_repr(self.value)}"
            return f"{text}: {self.detail}" if self.detail else text
        if self.type == "Required":
            return f"Required value: {self.detail}" if self.detail else "Required value"
        if self.type == "NotSupported":
            return f"Unsupported value: {go_repr(self.value)}" + (f": {self.detail}" if self.detail else "")
        if self.type == "Duplicate":
            return f"Duplicate value: {go_repr(self.value)}"
        if self.type == "Forbidden":
            return f"Forbidden: {self.detail}" if self.detail else "Forbidden"
        if self.type == "TooLong":
            return f"Too long: {self.detail}"
        if self.type == "TooMany":  # field.TooMany: the actual count, when known, is the bad value
            text = "Too many" if self.value is None else f"Too many: {go_repr(self.value)}"
            return f"{text}: {self.detail}" if self.detail else text
        return f"{self.type}: {self.detail}"

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("Invalid", field, value, detail)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("Required", field, None, detail)


def not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    return FieldError("NotSupported", field, value, "supported values: " + ", ".join(json.dumps(s) for s in supported))


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("Duplicate", field, value)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("Forbidden", field, None, detail)


# --- string checks: each returns the list of problems, empty when valid --------------------------

def _max_len(value: str, limit: int) -> list[str]:
    return [f"must be no more than {limit} characters"] if len(value) > limit else []


def dns1123_label_errors(value: str) -> list[str]:
    problems = _max_len(value, 63)
    if not _DNS1123_LABEL.match(value):
        problems.append(DNS1123_LABEL_MSG)
    return problems


def dns1123_subdomain_errors(value: str) -> list[str]:
    problems = _max_len(value, 253)
    if not _DNS1123_SUBDOMAIN.match(value):
        problems.append(DNS1123_SUBDOMAIN_MSG)
    return problems


def dns1035_label_errors(value: str) -> list[str]:
    problems = _max_len(value, 63)
    if not _DNS1035_LABEL.match(value):
        problems.append(DNS1035_LABEL_MSG)
    return problems


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName, for label and annotation keys: an optional DNS subdomain prefix, '/',
    and a name part. Problems with the prefix and with the name are all reported, in that order; an
    empty name is both "non-empty" and regex problem, as in apimachinery."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {p}" for p in dns1123_subdomain_errors(prefix)]
    else:
        return ["a qualified name " + QUALIFIED_NAME_MSG.removeprefix("name part ")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        problems.append(QUALIFIED_NAME_MSG)
    return problems


def label_key_errors(value: str) -> list[str]:
    return qualified_name_errors(value)


def label_value_errors(value: str) -> list[str]:
    problems = _max_len(value, 63)
    if not _LABEL_VALUE.match(value):
        problems.append(LABEL_VALUE_MSG)
    return problems


def port_name_errors(value: str) -> list[str]:
    """validation.IsValidPortName (IANA service names): at most 15 chars of [-a-z0-9], a letter, no '--',
    no hyphen at either end. Checked in apimachinery's order; an empty name fails the charset and the
    letter rule both."""
    problems = []
    if len(value) > 15:
        problems.append("must be no more than 15 characters")
    if not re.match(IANA_SVC_NAME_FMT, value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def port_number_errors(value: int) -> list[str]:
    return [] if 1 <= value <= 65535 else ["must be between 1 and 65535, inclusive"]


def validate_labels(labels: dict[str, str] | None, path: str) -> list[FieldError]:
    """metav1validation.ValidateLabels: both a bad key and a bad value are reported at the map's own path
    (`metadata.labels: Invalid value: "a b": ...`), not at `metadata.labels[key]`."""
    errs = []
    for key, val in (labels or {}).items():
        errs += [invalid(path, key, p) for p in label_key_errors(key)]
        errs += [invalid(path, val, p) for p in label_value_errors(val)]
    return errs


def validate_annotations(annotations: dict[str, str] | None, path: str) -> list[FieldError]:
    errs = []
    total = 0
    for key, val in (annotations or {}).items():
        errs += [invalid(path, key, p) for p in qualified_name_errors(key.lower())]
        total += len(key) + len(val)
    if total > 256 * 1024:
        errs.append(FieldError("TooLong", path, None, "must have at most 262144 bytes"))
    return errs
