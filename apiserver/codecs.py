"""Request bodies in (JSON, YAML, Kubernetes protobuf; size-limited, alias-bomb-safe) and responses out
(JSON, YAML).

What a body may become is bounded as well as what it may be: at most 3 MiB on the wire, nested at most
MAX_DEPTH deep, and a YAML body's aliases may add at most MAX_ALIAS_EXPANSION nodes and
MAX_ALIAS_EXPANSION_BYTES bytes (counted on the composed document, before anything is expanded). YAML
is read and written with libyaml (PyYAML's C loader and dumper) when it is there: the pure-Python
loader took 17 s of the event loop for a 1.3 MiB ConfigMap.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from itertools import accumulate
from typing import Any, ClassVar

import orjson
import yaml
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from . import errors, offload, protobuf
from .storage import StorageError

log = logging.getLogger(__name__)

PROTOBUF = "application/vnd.kubernetes.protobuf"
# What a create or an update may be sent as: the serializers kube-apiserver offers for built-in kinds
# (NegotiateInputSerializer; its 415 lists them in this order).
BODY_TYPES = ("application/json", "application/yaml", PROTOBUF)
MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request body limit (3 MiB)
# How much alias expansion a YAML body may add: anchors reused a few times are fine, a "billion laughs"
# (nine aliases of nine aliases of ...) is refused before anything walks the expanded document, and so
# is a handful of aliases of one huge scalar (88 KiB of YAML that would expand to 524 MB). go-yaml counts
# decode operations for the same purpose; kube's words are kept.
MAX_ALIAS_EXPANSION = 100_000
MAX_ALIAS_EXPANSION_BYTES = MAX_BODY
# Nesting limit for any body. Far above what Kubernetes objects need; it keeps every later step (the
# models, orjson's 255-level encoder, watch and Table wrappers) from failing with a 500 on a body
# that was accepted.
MAX_DEPTH = 128
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
# libyaml when PyYAML was built with it (its wheels are); its parser also stops at 1,000 levels of
# nesting by itself, where the pure-Python composer recursed until Python's limit.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YAML_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _SafeLoader(_YAML_LOADER):  # type: ignore[misc]  # PyYAML ships no type hints: its base is Any
    """A SafeLoader with kube's YAML-to-JSON habits (sigs.k8s.io/yaml): unquoted timestamps stay
    strings, so `creationTimestamp: 2024-01-01T00:00:00Z` reaches a string field as a string. It
    refuses recursive aliases, excessive alias expansion and excessive nesting."""

    yaml_implicit_resolvers: ClassVar[dict[Any, Any]] = {first: [(tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP]
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def construct_document(self, node: yaml.Node) -> Any:
        _check_node_graph(node)
        return super().construct_document(node)


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _own_bytes(node: yaml.Node) -> int:
    """What a node adds to the JSON it becomes, roughly: a scalar's text and its quotes and separator,
    a collection's brackets."""
    return len(node.value) + 3 if isinstance(node, yaml.ScalarNode) else 2


def _check_node_graph(root: yaml.Node) -> None:
    """Size, bytes and depth of the composed document as it will be expanded. Aliases make the node graph a
    DAG (or, with a recursive alias, a cycle); this walks it once, without recursion, and compares the
    expanded document (every alias counted as a copy) with the one written down (every node once)."""
    size: dict[int, int] = {}
    weight: dict[int, int] = {}
    depth: dict[int, int] = {}
    written = 0
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            children = _node_children(node)
            own = _own_bytes(node)
            written += own
            size[key] = 1 + sum(size[id(c)] for c in children)
            weight[key] = own + sum(weight[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            visiting.discard(key)
            continue
        if key in size:
            continue
        visiting.add(key)
        stack.append((node, True))
        for child in _node_children(node):
            if id(child) in visiting:
                raise yaml.YAMLError("document contains a recursive alias")
            if id(child) not in size:
                stack.append((child, False))
    if depth[id(root)] > MAX_DEPTH:
        raise yaml.YAMLError(f"exceeded max depth of {MAX_DEPTH}")
    if size[id(root)] - len(size) > MAX_ALIAS_EXPANSION or weight[id(root)] - written > MAX_ALIAS_EXPANSION_BYTES:
        raise yaml.YAMLError("document contains excessive aliasing")


def _json_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def _to_json(value: Any) -> Any:
    """What YAMLToJSON makes of a YAML value: object keys are strings (`1: a` -> `"1": "a"`), binary
    is base64 text, sets are objects. Depth is bounded by MAX_DEPTH, checked before."""
    if isinstance(value, dict):
        return {_json_key(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, set):
        return {_json_key(k): None for k in value}
    return value


def check_depth(value: Any) -> None:
    """ValueError if `value` nests deeper than MAX_DEPTH (a walk of every node: for bodies, decode's
    scan of the text is cheaper)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > MAX_DEPTH:
            raise ValueError(f"exceeded max depth of {MAX_DEPTH}")
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)


# What the depth scan keeps of a JSON text: brackets, and the quotes that say which brackets are text.
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')
_DEPTH_STEP = [0] * 256
_DEPTH_STEP[ord("[")] = _DEPTH_STEP[ord("{")] = 1
_DEPTH_STEP[ord("]")] = _DEPTH_STEP[ord("}")] = -1
# Brackets scanned per step. Each step is one call into C that holds the GIL; the event loop, which
# waits for the GIL while this runs in the worker thread (offload.py), waits no longer than a step.
_DEPTH_CHUNK = 64 * 1024


def json_depth(raw: bytes) -> int:
    """How deep a JSON text (one orjson has accepted) nests, read from its brackets outside strings, in
    C-speed steps: a walk of the decoded value took seconds for 3 MiB of `[{},{},...]`, and a regular
    expression over the strings held the GIL for 180 ms."""
    # Escapes first: without `\\` pairs, every `\"` left is a quote inside a string; then every quote
    # opens or closes one, and the text outside strings is every other piece between quotes.
    text = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = b"".join(text.split(b'"')[::2])
    depth = deepest = 0
    for start in range(0, len(brackets), _DEPTH_CHUNK):
        steps = list(accumulate(map(_DEPTH_STEP.__getitem__, brackets[start:start + _DEPTH_CHUNK]), initial=depth))
        deepest, depth = max(deepest, max(steps)), steps[-1]
    return deepest


def load_yaml(text: str | bytes) -> Any:
    try:
        return _to_json(yaml.load(text, Loader=_SafeLoader))  # _SafeLoader is a SafeLoader
    except RecursionError as exc:  # PyYAML's composer recurses; deeper than Python allows is too deep
        raise yaml.YAMLError(f"exceeded max depth of {MAX_DEPTH}") from exc


def load_yaml_all(text: str | bytes) -> list[Any]:
    try:
        return [_to_json(d) for d in yaml.load_all(text, Loader=_SafeLoader) if d is not None]
    except RecursionError as exc:
        raise yaml.YAMLError(f"exceeded max depth of {MAX_DEPTH}") from exc


BODY_KEY = "kubelab.body"  # the body, once read, in the ASGI scope: admission reads it before the handler


async def read_body(request: Request) -> bytes:
    """The whole request body, 3 MiB at most (413 past it, by Content-Length or while reading). Read
    once per request: a second call gives the same bytes."""
    kept: bytes | None = request.scope.get(BODY_KEY)
    if kept is not None:
        return kept
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_BODY:
        raise errors.too_large()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise errors.too_large()
        chunks.append(chunk)
    body = b"".join(chunks)
    request.scope[BODY_KEY] = body
    return body


def media_type(request: Request) -> str:
    return (request.headers.get("content-type") or "application/json").split(";")[0].strip().lower()


def decode(content_type: str, raw: bytes) -> Any:
    if not raw.strip():
        raise errors.bad_request("Object 'Kind' is missing in ''" if content_type != "application/json-patch+json"
                                 else "empty patch")
    if content_type in ("application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml"):
        try:
            return load_yaml(raw)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error converting YAML to JSON: yaml: {str(exc).splitlines()[0]}") from exc
    if content_type in ("application/json", "application/merge-patch+json", "application/strategic-merge-patch+json",
                        "application/json-patch+json", "*/*", ""):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
        # A document with no more brackets than the limit cannot nest deeper: skip the scan (brackets
        # inside strings only make this count higher, never lower).
        if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and json_depth(raw) > MAX_DEPTH:
            raise errors.bad_request(f"couldn't get version/kind; json parse error: exceeded max depth of "
                                     f"{MAX_DEPTH}")
        return value
    if content_type == PROTOBUF:
        # kubectl 1.32+ sends its generators' objects as protobuf; they become the JSON dict the same
        # object would have been, and go through the same decoding and validation.
        try:
            return protobuf.decode_object(raw)
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(f"the object provided is unrecognized: {exc}") from exc
    raise errors.unsupported_media_type(BODY_TYPES)


# Go's encoding/json Encoder, which kube-apiserver's JSON serializer writes every object and Status with:
# `<`, `>` and `&` escaped as \u003c, \u003e, \u0026 (its HTML-safe default), U+2028 and U+2029 escaped,
# and a line feed after the value. Clients compare error bodies verbatim, so the bytes matter. orjson
# writes those characters raw; outside strings JSON has none of them, so replacing bytes is exact.
_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
               ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def go_escape(data: bytes) -> bytes:
    """orjson's output as Go's HTML-safe encoder writes it (no trailing newline)."""
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def encode_json(body: Any) -> bytes:
    """`body` as kube-apiserver's JSON serializer writes it (json.NewEncoder(w).Encode): Go's escaping and
    a final line feed. A watch event is one such line."""
    return go_escape(orjson.dumps(body)) + b"\n"


def wants_yaml(request: Request) -> bool:
    accept = request.headers.get("accept") or ""
    return "application/yaml" in accept and "application/json" not in accept


def respond(request: Request, body: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    if wants_yaml(request):
        size = offload.object_bytes(body)
        if offload.is_heavy(size):
            # PyYAML's representer walks every node in Python even with libyaml's emitter (a second for
            # a 0.5 MiB ConfigMap): the text is made off the event loop and sent when it is ready.
            async def dumped() -> AsyncIterator[bytes]:
                yield (await offload.run(size, _dump_yaml, body)).encode()

            return StreamingResponse(dumped(), status_code=status_code, media_type="application/yaml",
                                     headers=headers)
        return Response(_dump_yaml(body), status_code=status_code, media_type="application/yaml", headers=headers)
    return Response(encode_json(body), status_code=status_code, media_type="application/json", headers=headers)


async def respond_sized(request: Request, body: Any, size: int) -> Response:
    """respond(), for a body whose size is known beforehand (a LIST: its items' stored bytes): a big JSON
    answer is encoded off the event loop (offload.py), not in one orjson call holding it."""
    if wants_yaml(request) or not offload.is_heavy(size):
        return respond(request, body)
    return Response(await offload.run(size, encode_json, body), media_type="application/json")


def _dump_yaml(body: Any) -> str:
    return str(yaml.dump(body, Dumper=_YAML_DUMPER, sort_keys=False))


def status_response(exc: errors.StatusError) -> Response:
    # responsewriters.ErrorNegotiated: a Status that says when to retry says it in Retry-After too.
    retry = (exc.details or {}).get("retryAfterSeconds")
    headers = {"Retry-After": str(retry)} if isinstance(retry, int) and retry > 0 else None
    return Response(encode_json(exc.status()), status_code=exc.code, media_type="application/json", headers=headers)


def error_response(request: Request, exc: Exception) -> Response:
    """The Status answer for an exception a request handler raised: kube's codes, never a bare 500 page."""
    if isinstance(exc, errors.StatusError):
        return status_response(exc)
    if isinstance(exc, StorageError):
        return status_response(errors.from_storage(exc))
    if isinstance(exc, ClientDisconnect):
        # The client went before its body was read: no fault of ours, and no one to answer. kube-apiserver
        # logs that error's one line (runtime.HandleError), not a stack.
        log.warning("%s %s: the client disconnected before sending its whole body", request.method,
                    request.url.path)
        return status_response(errors.StatusError(500, "", "client disconnected"))
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return status_response(errors.internal(f"{type(exc).__name__}: {exc}"))
