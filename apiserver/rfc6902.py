"""JSON patch (RFC 6902) as kube-apiserver applies it, with the same bounds.

kube-apiserver applies a JSON patch with evanphx/json-patch (v4), and bounds what one may make, not only
what it sends (k8s.io/apiserver/pkg/endpoints/handlers/patch.go):

- at most `maxJSONPatchOperations` = 10,000 operations: past that, 413 `Request entity too large: The
  allowed maximum operations in a JSON patch is 10000, got N`;
- `copy` operations may add at most 3 MiB in all (the library's AccumulatedCopySizeLimit, which the API
  server sets from its JSONPatchMaxCopyBytes): past that, the copy fails with the library's words and
  the patch is a 422. Without it, `add` a subtree then `copy` it into itself twenty times doubles the
  object twenty times (900 MB from a 1.6 KiB body).

The document is copied once and every operation then works on that copy in place, so an operation
costs what it touches, not the size of the document (applying each operation to a fresh copy made
8,000 `add`s cost 8,000 copies). Paths, indices and messages follow the library: negative array
indices count from the end, a missing key in `test` reads as null, and errors read as it words
them (`error in remove for path: '/x': Unable to remove nonexistent key: x: missing value`).

Pure functions on JSON values; the caller gets a PatchFailed (one message, the 422's cause) or a
StatusError for the 413.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from . import errors, gojson

MAX_OPERATIONS = 10_000
MAX_COPY_BYTES = 3 * 1024 * 1024

_INDEX = re.compile(r"[+-]?[0-9]{1,18}")
# Bytes Go's encoding/json writes for what orjson writes as one: HTML characters become \u003c etc.
_HTML = (b"<", b">", b"&")


class PatchFailed(Exception):
    """An operation that does not apply; its message is the library's."""


class TooDeep(PatchFailed):
    """A copy of a value nested too deep to encode: a chain of copies into themselves."""


def apply(original: Any, patch: list[Any]) -> Any:
    """`patch` (already decoded) applied to a copy of `original`; raises PatchFailed or StatusError."""
    for op in patch:
        if op is not None and not isinstance(op, dict):
            raise errors.bad_request(f"json: cannot unmarshal {gojson.type_name(op)} into Go value of type "
                                     "jsonpatch.Operation")
    if len(patch) > MAX_OPERATIONS:
        raise errors.too_large(f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, "
                               f"got {len(patch)}")
    doc = clone(original)
    copied = [0]
    for op in patch:
        _apply_op(doc, op or {}, copied)
    return doc


def clone(value: Any) -> Any:
    """A deep copy of a JSON value: through orjson (C speed) unless it holds what orjson cannot write."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return _rebuild(value)


def _rebuild(value: Any) -> Any:
    # Not copy.deepcopy: it would keep two references to one object (a YAML alias) as one, and a later
    # in-place merge into one place would change the other.
    if isinstance(value, dict):
        return {k: _rebuild(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rebuild(v) for v in value]
    return value




# --- pointers -----------------------------------------------------------------------------------

def _tokens(pointer: str) -> list[str] | None:
    """RFC 6901 reference tokens of `pointer`; None for one that does not start with `/`."""
    if not pointer.startswith("/"):
        return None
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(token: str, size: int) -> int | None:
    """An array index as strconv.Atoi reads it, negative ones counting from the end; None if it is not one
    or falls outside [-size, size)."""
    if not _INDEX.fullmatch(token):
        return None
    idx = int(token)
    if idx < 0:
        idx += size
    return idx if 0 <= idx < size else None


def _child(container: Any, token: str) -> tuple[bool, Any]:
    if isinstance(container, dict):
        return (True, container[token]) if token in container else (False, None)
    if isinstance(container, list):
        idx = _index(token, len(container))
        return (True, container[idx]) if idx is not None else (False, None)
    return False, None


def _parent(doc: Any, pointer: str) -> tuple[Any, str] | None:
    """findObject: the container that holds `pointer`'s last token, and that token; None when a step
    is missing or the pointer is not one (the empty pointer names no member)."""
    tokens = _tokens(pointer)
    if not tokens:
        return None
    current = doc
    for token in tokens[:-1]:
        found, current = _child(current, token)
        if not found or not isinstance(current, dict | list):
            return None
    return current, tokens[-1]


# --- container operations -----------------------------------------------------------------------

def _get(container: Any, key: str) -> Any:
    if isinstance(container, dict):
        if key not in container:
            raise PatchFailed(f"unable to get nonexistent key: {key}: missing value")
        return container[key]
    idx = _index(key, len(container))
    if idx is None:
        raise PatchFailed(_bad_index(key))
    return container[idx]


def _add(container: Any, key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    # An insert may name one past the end (append), so the range is one wider than for the others.
    idx = _index(key, len(container) + 1)
    if idx is None:
        raise PatchFailed(_bad_index(key))
    container.insert(idx, value)


def _remove(container: Any, key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise PatchFailed(f"Unable to remove nonexistent key: {key}: missing value")
        del container[key]
        return
    idx = _index(key, len(container))
    if idx is None:
        raise PatchFailed(_bad_index(key))
    del container[idx]


def _bad_index(key: str) -> str:
    if not _INDEX.fullmatch(key):
        return f"value was not a proper array index: '{key}': strconv.Atoi: parsing \"{key}\": invalid syntax"
    return f"Unable to access invalid index: {key}: invalid index referenced"


# --- operations ---------------------------------------------------------------------------------

def _field(op: dict[str, Any], name: str, kind: str) -> str:
    value = op.get(name)
    if not isinstance(value, str):
        raise PatchFailed(f"{kind} operation failed to decode {name}: missing value")
    return value


def _apply_op(doc: Any, op: dict[str, Any], copied: list[int]) -> None:
    kind = op.get("op")
    if kind == "add":
        path = _field(op, "path", kind)
        target = _parent(doc, path)
        if target is None:
            raise PatchFailed(f'add operation does not apply: doc is missing path: "{path}": missing value')
        _wrapped(f"error in add for path: '{path}'", _add, *target, clone(op.get("value")))
    elif kind == "remove":
        path = _field(op, "path", kind)
        target = _parent(doc, path)
        if target is None:
            raise PatchFailed(f'remove operation does not apply: doc is missing path: "{path}": missing value')
        _wrapped(f"error in remove for path: '{path}'", _remove, *target)
    elif kind == "replace":
        path = _field(op, "path", kind)
        target = _parent(doc, path)
        if target is None:
            raise PatchFailed(f"replace operation does not apply: doc is missing path: {path}: missing value")
        container, key = target
        try:
            _get(container, key)
        except PatchFailed:
            raise PatchFailed(f"replace operation does not apply: doc is missing key: {path}: missing value"
                              ) from None
        if isinstance(container, dict):
            container[key] = clone(op.get("value"))
        else:
            idx = _index(key, len(container))
            assert idx is not None  # _get found it
            container[idx] = clone(op.get("value"))
    elif kind == "move":
        source = _field(op, "from", kind)
        target = _parent(doc, source)
        if target is None:
            raise PatchFailed(f"move operation does not apply: doc is missing from path: {source}: missing value")
        value = _wrapped(f"error in move for path: '{target[1]}'", _get, *target)
        _wrapped(f"error in move for path: '{target[1]}'", _remove, *target)
        path = _field(op, "path", kind)
        destination = _parent(doc, path)
        if destination is None:
            raise PatchFailed(f"move operation does not apply: doc is missing destination path: {path}: "
                              "missing value")
        _wrapped(f"error in move for path: '{path}'", _add, *destination, value)
    elif kind == "copy":
        _copy(doc, op, copied)
    elif kind == "test":
        _test(doc, op)
    else:
        raise PatchFailed(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")


def _wrapped(context: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except PatchFailed as exc:
        raise PatchFailed(f"{context}: {exc}") from None


def _copy(doc: Any, op: dict[str, Any], copied: list[int]) -> None:
    source = _field(op, "from", "copy")
    target = _parent(doc, source)
    if target is None:
        raise PatchFailed(f"copy operation does not apply: doc is missing from path: {source}: missing value")
    value = _wrapped(f"error in copy for from: '{source}'", _get, *target)
    path = _field(op, "path", "copy")
    destination = _parent(doc, path)
    if destination is None:
        raise PatchFailed(f"copy operation does not apply: doc is missing destination path: {path}: missing value")
    # The copy is counted at its JSON size, as the library counts the bytes it marshals; the count is
    # checked before the copy goes in, so the document never holds more than the limit allows.
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError as exc:  # nested deeper than orjson writes (255), far past what a body may be
        raise TooDeep(str(exc)) from None
    copied[0] += len(encoded) + 5 * sum(encoded.count(c) for c in _HTML)
    if copied[0] > MAX_COPY_BYTES:
        raise PatchFailed(f"Unable to complete the copy, the accumulated size increase of copy is {copied[0]}, "
                          f"exceeding the limit {MAX_COPY_BYTES}")
    _wrapped("error while adding value during copy", _add, *destination, orjson.loads(encoded))


def _test(doc: Any, op: dict[str, Any]) -> None:
    path = _field(op, "path", "test")
    expected = op.get("value")
    if path == "":
        if not _equal(doc, expected):
            raise PatchFailed(f"testing value {path} failed: test failed")
        return
    target = _parent(doc, path)
    if target is None:
        raise PatchFailed(f"test operation does not apply: is missing path: {path}: missing value")
    container, key = target
    try:
        actual = _get(container, key)
    except PatchFailed:
        if isinstance(container, list):
            raise PatchFailed(f"error in test for path: '{path}': {_bad_index(key)}") from None
        actual = None  # a missing key tests equal to null, as the library reads it
    if actual is None and expected is None:
        return
    if actual is None or expected is None or not _equal(actual, expected):
        raise PatchFailed(f"testing value {path} failed: test failed")


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0 (both are the number 1 in JSON)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
