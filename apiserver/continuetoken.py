"""The continue token of a paged LIST, byte for byte kube-apiserver's (k8s.io/apiserver/pkg/storage/continue.go).

A token is the unpadded URL-safe base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key suffix>"}`:
the etcd revision every page of the list is read at, and the key (relative to the list's prefix) the
next page starts from, which is the last key returned followed by a NUL. Clients treat it as opaque;
keeping kube's format means a token from one API server is understood by another, and a client that
decodes it (some do) sees what it expects.

Decoding refuses what kube refuses, in kube's words (`continue key is not valid: ...`), and keeps a
token from reaching outside the list's prefix: the start key must already be a clean path (Go's
path.Clean), so `../secrets/x` cannot walk out of `/registry/pods/default/`. Pure: no I/O.
"""

from __future__ import annotations

import binascii
import json
import string
from typing import Any

import orjson

from . import gojson, strconv

VERSION = "meta.k8s.io/v1"
GENERIC = "continue key is not valid"
_ALPHABET = frozenset(string.ascii_letters + string.digits + "-_")


class InvalidContinue(ValueError):
    """A token kube-apiserver would refuse; the text is kube's (`invalid continue token: <text>`)."""


def encode(key: str, key_prefix: str, revision: int) -> str:
    """EncodeContinue: the token for a next page that starts at `key` (under `key_prefix`), read at
    `revision` (-1: at whatever revision is current, after a compaction)."""
    if not key.startswith(key_prefix) or key == key_prefix:
        raise ValueError(f"unable to encode next field: the key and key prefix do not match {key_prefix} {key}")
    token = {"v": VERSION, "rv": revision, "start": key[len(key_prefix):]}
    return _b64encode(_go_json(token))


def decode(token: str, key_prefix: str) -> tuple[str, int]:
    """DecodeContinue: (the key the page starts from, the revision to read at; -1 for the current one)."""
    try:
        data = _b64decode(token)
    except InvalidContinue as exc:
        raise InvalidContinue(f"{GENERIC}: {exc}") from None
    version, revision, start = _unmarshal(data)
    if version != VERSION:
        raise InvalidContinue(f"{GENERIC}: server does not recognize this encoded version {version}")
    if revision == 0:
        raise InvalidContinue(f"{GENERIC}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not start:
        raise InvalidContinue(f"{GENERIC}: encoded start key empty (version meta.k8s.io/v1)")
    key = start if start.startswith("/") else "/" + start
    if clean_path(key) != key:
        raise InvalidContinue(f"{GENERIC}: {start}")
    return key_prefix + key[1:], revision


# --- Go's path.Clean, base64.RawURLEncoding and encoding/json, as far as a token needs them ---------

def clean_path(path: str) -> str:
    """path.Clean for a rooted path: no empty, `.` or `..` elements, no trailing slash; `/..` stays `/`.
    (posixpath.normpath differs: it keeps a leading `//`.)"""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def _b64encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode().rstrip("=").replace("+", "-").replace("/", "_")


def _b64decode(text: str) -> bytes:
    """RawURLEncoding.DecodeString: the URL alphabet, no padding; Go skips CR and LF. An illegal
    character, or a lone character at the end, is `illegal base64 data at input byte N`."""
    clean = []
    for index, ch in enumerate(text):
        if ch in "\r\n":
            continue
        if ch not in _ALPHABET:
            raise InvalidContinue(f"illegal base64 data at input byte {len(text[:index].encode())}")
        clean.append(ch)
    if len(clean) % 4 == 1:
        raise InvalidContinue(f"illegal base64 data at input byte {len(text.encode()) - 1}")
    padded = "".join(clean).replace("-", "+").replace("_", "/")
    return binascii.a2b_base64(padded + "=" * (-len(padded) % 4))


def _go_json(value: dict[str, Any]) -> bytes:
    """json.Marshal's output: compact, non-ASCII as is, and `<`, `>`, `&` escaped as Go escapes them."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


_FIELDS = {"v": ("v", str, "string"), "rv": ("rv", int, "int64"), "start": ("start", str, "string")}




def _unmarshal(data: bytes) -> tuple[str, int, str]:
    """json.Unmarshal into continueToken: keys matched case-insensitively as encoding/json does, null
    leaves a field unset, a value of the wrong type is Go's `cannot unmarshal` error."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InvalidContinue(f"{GENERIC}: {_syntax_error(data)}") from None
    if not isinstance(doc, dict):
        raise InvalidContinue(f"{GENERIC}: json: cannot unmarshal {gojson.type_name(doc)} into Go value of type "
                              "storage.continueToken")
    fields: dict[str, Any] = {"v": "", "rv": 0, "start": ""}
    for key, value in doc.items():
        name = key.lower()
        if name not in _FIELDS or value is None:
            continue
        _, want, go_type = _FIELDS[name]
        if want is int:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidContinue(f"{GENERIC}: json: cannot unmarshal {gojson.type_name(value)} into Go struct field "
                                      f"continueToken.{name} of type {go_type}")
            if isinstance(value, float) or not -(2**63) <= value < 2**63:
                raise InvalidContinue(f"{GENERIC}: json: cannot unmarshal number {_number_text(data, key)} into Go "
                                      f"struct field continueToken.{name} of type {go_type}")
        elif not isinstance(value, want):
            raise InvalidContinue(f"{GENERIC}: json: cannot unmarshal {gojson.type_name(value)} into Go struct field "
                                  f"continueToken.{name} of type {go_type}")
        fields[name] = value
    return fields["v"], fields["rv"], fields["start"]


def _number_text(data: bytes, key: str) -> str:
    """The number literal as the client wrote it (Go quotes the literal, not a re-printed float)."""
    text = data.decode(errors="replace")
    at = text.find(json.dumps(key))
    if at < 0:
        return "?"
    rest = text[at + len(json.dumps(key)):].lstrip(" \t\r\n").lstrip(":").lstrip(" \t\r\n")
    end = 0
    while end < len(rest) and rest[end] in "+-0123456789.eE":
        end += 1
    return rest[:end]


def _syntax_error(data: bytes) -> str:
    """The common encoding/json syntax errors: empty or cut short, or a first character no JSON value
    starts with."""
    text = data.decode(errors="replace").lstrip(" \t\r\n")
    if not text:
        return "unexpected end of JSON input"
    first = text[0]
    if first not in '{["-0123456789tfn':
        char = "'\\''" if first == "'" else "'" + strconv.quote(first)[1:-1].replace('\\"', '"') + "'"
        return f"invalid character {char} looking for beginning of value"
    return "unexpected end of JSON input" if _truncated(text) else "invalid JSON"


def _truncated(text: str) -> bool:
    """Whether appending more input could still make `text` valid (Go says `unexpected end`)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0
