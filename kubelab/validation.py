"""Field validation in kube-apiserver's words: names, label keys and values, ports, and the error type.

`FieldError` renders exactly as apimachinery's `field.Error` does, so a 422 from kubelab reads like
one from a real cluster: `spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`.

Every check here answers as the Go code it copies would, string for string, not only for the strings
kube's own tests try. Three Python habits differ from Go and are kept out on purpose:

* `re.match("^[a-z]+$", "evil\\n")` matches (`$` also matches before a final newline, and `match`
  anchors only the start), while Go's `regexp.MustCompile("^[a-z]+$").MatchString` does not (RE2's `$`
  is the end of the text). Patterns are therefore written as kube writes its `...Fmt` constants,
  without anchors, and compiled once by `GoRegexp`, which matches the whole string or searches, as the
  Go code asks, never with `$`. A Service named "evil\\n" once passed and broke every node's
  iptables-restore.
* `\\d`, `\\w`, `str.isdigit()` and `str.isalnum()` accept non-ASCII digits and letters ('²', 'é');
  Go's classes and kube's patterns are ASCII. `GoRegexp` compiles with re.ASCII, and the ASCII
  predicates below replace the str methods.
* Go's `len` counts UTF-8 bytes: "é" * 40 is over the 63 of a label in Go, not in Python.

scripts/validation_oracle.go asks Go itself about a corpus of hostile strings, and
tests/unit/test_validation_go.py holds these checks to its answers.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
IANA_SVC_NAME_FMT = "[-a-z0-9]+"
CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"


class GoRegexp:
    """A pattern as Go's `regexp` runs it, for the `MatchString` calls of kube's validation.

    `fmt` is given without anchors, as kube's `...Fmt` constants are; `matches` is Go's
    `regexp.MustCompile("^" + fmt + "$").MatchString` (the whole text, a trailing newline included) and
    `found_in` is `regexp.MustCompile(fmt).MatchString` (anywhere in the text). An anchor in `fmt` is
    refused, so no pattern can come back to Python's `$`. Compiled with re.ASCII, as Go's `\\d`, `\\w`
    and `\\s` are ASCII; case folding (re.IGNORECASE, which maps the Kelvin sign to 'k') is never used.
    """

    __slots__ = ("_pattern", "fmt")

    def __init__(self, fmt: str) -> None:
        if fmt.startswith("^") or fmt.endswith("$") or "\\Z" in fmt or "\\A" in fmt:
            raise ValueError(f"give GoRegexp the pattern without anchors: {fmt!r}")
        self.fmt = fmt
        self._pattern = re.compile(fmt, re.ASCII)

    def matches(self, value: str) -> bool:
        return self._pattern.fullmatch(value) is not None

    def found_in(self, value: str) -> bool:
        return self._pattern.search(value) is not None

    def __repr__(self) -> str:
        return f"GoRegexp({self.fmt!r})"


DNS1123_LABEL = GoRegexp(DNS1123_LABEL_FMT)
DNS1123_SUBDOMAIN = GoRegexp(DNS1123_SUBDOMAIN_FMT)
DNS1035_LABEL = GoRegexp(DNS1035_LABEL_FMT)
QUALIFIED_NAME = GoRegexp(QUALIFIED_NAME_FMT)
LABEL_VALUE = GoRegexp(LABEL_VALUE_FMT)
IANA_SVC_NAME = GoRegexp(IANA_SVC_NAME_FMT)
ONE_LETTER = GoRegexp("[a-z]")
CONFIG_MAP_KEY = GoRegexp(CONFIG_MAP_KEY_FMT)

ASCII_DIGITS = frozenset("0123456789")


def go_len(value: str) -> int:
    """Go's `len(value)`: the UTF-8 bytes of the string (a lone surrogate, which Go's JSON decoder
    turns into U+FFFD, counts as the three bytes of that)."""
    return len(value.encode("utf-8", "surrogatepass")) if not value.isascii() else len(value)


def is_ascii_digits(value: str) -> bool:
    """One or more of 0-9 and nothing else: what strconv's parsers take as digits (`str.isdigit`
    also takes '²' and '٣')."""
    return bool(value) and value.isascii() and value.isdigit()


def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IP address as Go's net.ParseIP reads one, or ValueError. Python also takes an IPv6 zone
    ("fe80::1%eth0", with anything after the '%', a newline included); Go does not."""
    if "%" in text:
        raise ValueError(f"{text!r}: an IP address has no zone")
    return ipaddress.ip_address(text)


def is_ip(text: str) -> bool:
    """Whether `text` is an IP address net.ParseIP takes."""
    try:
        parse_ip(text)
    except ValueError:
        return False
    return True


def parse_cidr(text: str, *, strict: bool = False) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """A CIDR as Go's net.ParseCIDR reads one (no zone), or ValueError."""
    if "%" in text or "/" not in text:
        raise ValueError(f"{text!r}: not a CIDR")
    return ipaddress.ip_network(text, strict=strict)


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


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               '"': '\\"', "\\": "\\\\"}


def go_quote(value: str) -> str:
    """strconv.Quote, which field.Error uses for a string (%q): printable characters as they are (Go's
    unicode.IsPrint and Python's str.isprintable agree), the C escapes, then \\x, \\u or \\U. JSON would
    leave a zero-width space or DEL raw in the message, and spell NUL \\u0000 where Go writes \\x00. A
    lone surrogate is U+FFFD, as Go's JSON decoder made it."""
    out = ['"']
    for char in value:
        if "\ud800" <= char <= "\udfff":
            char = "\ufffd"
        escaped = _GO_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char.isprintable():
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_repr(value: Any) -> str:
    """How Go's `%#v`-ish formatting in field.Error prints a bad value."""
    if isinstance(value, GoLiteral):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
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
    "TypeInvalid": "FieldValueTypeInvalid",  # field.TypeInvalid: a value of the wrong JSON type (custom objects)
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
        if self.type in ("Invalid", "TypeInvalid"):
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
    return [f"must be no more than {limit} characters"] if go_len(value) > limit else []


def dns1123_label_errors(value: str) -> list[str]:
    problems = _max_len(value, 63)
    if not DNS1123_LABEL.matches(value):
        problems.append(DNS1123_LABEL_MSG)
    return problems


def dns1123_subdomain_errors(value: str) -> list[str]:
    problems = _max_len(value, 253)
    if not DNS1123_SUBDOMAIN.matches(value):
        problems.append(DNS1123_SUBDOMAIN_MSG)
    return problems


def dns1035_label_errors(value: str) -> list[str]:
    problems = _max_len(value, 63)
    if not DNS1035_LABEL.matches(value):
        problems.append(DNS1035_LABEL_MSG)
    return problems


def is_dns1123_label(value: str) -> bool:
    return go_len(value) <= 63 and DNS1123_LABEL.matches(value)


def is_dns1123_subdomain(value: str) -> bool:
    return go_len(value) <= 253 and DNS1123_SUBDOMAIN.matches(value)


def is_dns1035_label(value: str) -> bool:
    return go_len(value) <= 63 and DNS1035_LABEL.matches(value)


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
    elif go_len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not QUALIFIED_NAME.matches(name):
        problems.append(QUALIFIED_NAME_MSG)
    return problems


def label_key_errors(value: str) -> list[str]:
    return qualified_name_errors(value)


def label_value_errors(value: str) -> list[str]:
    problems = _max_len(value, 63)
    if not LABEL_VALUE.matches(value):
        problems.append(LABEL_VALUE_MSG)
    return problems


def is_label_value(value: str) -> bool:
    return go_len(value) <= 63 and LABEL_VALUE.matches(value)


def port_name_errors(value: str) -> list[str]:
    """validation.IsValidPortName (IANA service names): at most 15 chars of [-a-z0-9], a letter, no '--',
    no hyphen at either end. Checked in apimachinery's order; an empty name fails the charset and the
    letter rule both."""
    problems = []
    if go_len(value) > 15:
        problems.append("must be no more than 15 characters")
    if not IANA_SVC_NAME.matches(value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not ONE_LETTER.found_in(value):
        problems.append("must contain at least one letter (a-z)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


CONFIG_MAP_KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
                      "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                      f"'{CONFIG_MAP_KEY_FMT}')")


def config_map_key_errors(value: str) -> list[str]:
    """validation.IsConfigMapKey, for the keys of ConfigMaps and Secrets: at most 253 characters of
    [-._a-zA-Z0-9], and not '.', '..' or anything starting with '..' (the key is a file name in a
    volume)."""
    problems = _max_len(value, 253)
    if not CONFIG_MAP_KEY.matches(value):
        problems.append(CONFIG_MAP_KEY_MSG)
    if value == ".":
        problems.append("must not be '.'")
    elif value == "..":
        problems.append("must not be '..'")
    elif value.startswith(".."):
        problems.append("must not start with '..'")
    return problems


def go_lower(value: str) -> str:
    """Go's strings.ToLower: simple case mapping, rune by rune. Python's str.lower() uses the full
    mapping, which turns 'İ' into "i" plus a combining dot where Go gives a plain 'i' (and so a valid
    annotation key in kube); the Kelvin sign becomes 'k' in both."""
    return value.lower() if value.isascii() else "".join("i" if c == "\u0130" else c.lower() for c in value)


def path_segment_name_errors(value: str) -> list[str]:
    """path.IsValidPathSegmentName: what a name must be to stand as one segment of a URL path (the names
    of kinds without a stricter rule, such as APIService)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


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
        errs += [invalid(path, key, p) for p in qualified_name_errors(go_lower(key))]
        total += go_len(key) + go_len(val)  # bytes, as Go counts them
    if total > 256 * 1024:
        errs.append(FieldError("TooLong", path, None, "must have at most 262144 bytes"))
    return errs
