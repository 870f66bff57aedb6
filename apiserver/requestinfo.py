"""What a request is about, parsed once from its method, path and query, as kube-apiserver's
RequestInfoFactory parses it (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go).

The one parse is made in the outermost layer and kept in the ASGI scope (`of(scope)`); the authorizer
judges it and the resource router dispatches on it. Two parsers once disagreed: the authorizer read
`POST /api/v1/watch/namespaces/kube-system/secrets` as a watch (a read, which a node may do) while the
router created a Secret. Now there is nothing to disagree: `watch` in the path is a verb that only GET
serves (the router answers any other method there with 405, as kube's mux does), and everything the
router needs (resource, namespace, name, subresource) comes from this record.

Pure: no I/O, no registry; resolving `resource` to a served kind is the router's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import QueryParams
from starlette.types import Scope

SCOPE_KEY = "kubelab.request_info"

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
# Path segments that are verbs rather than resources: /api/v1/watch/..., /api/v1/proxy/...
SPECIAL_VERBS = frozenset({"proxy", "watch"})
SPECIAL_VERBS_WITHOUT_SUBRESOURCES = frozenset({"proxy"})
# The subresources of a namespace: /api/v1/namespaces/NAME/status is not a resource named "status".
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}
READ_VERBS = frozenset({"get", "list", "watch"})


@dataclass(slots=True)
class RequestInfo:
    """kube's RequestInfo, made once per request and not changed after (not a frozen dataclass only
    because its __init__ costs three times as much, on every request). `verb` is the kube verb for resource requests (get, list, watch, create,
    update, patch, delete, deletecollection, or a special verb), the lower-case method otherwise.
    `parts` are the path segments from the resource on (`pods`, `web`, `status`, ...); `special_verb`
    says which special segment (`watch`, `proxy`) preceded them, "" for none."""

    path: str
    verb: str
    is_resource: bool = False
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = field(default=())
    special_verb: str = ""
    # Whether the resource came after /namespaces/NS/ (NS may be empty: `/api/v1/namespaces//pods`, which
    # kube's parser reads as a cluster-scope request and its mux has no route for).
    in_namespace_path: bool = False

    @property
    def group_resource(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def is_read(self) -> bool:
        return self.verb in READ_VERBS


def _split_path(path: str) -> list[str]:
    """splitPath: trim slashes at both ends, then split; empty segments inside stay (`/a//b` has three)."""
    path = path.strip("/")
    return path.split("/") if path else []


def _first(query: Mapping[str, str] | QueryParams | bytes, key: str) -> str | None:
    """The first value of a query parameter, as Go's url.Values[key][0] (Starlette's get gives the last).
    `query` may be the raw query string: it is parsed only when a parameter is needed."""
    if isinstance(query, bytes):
        query = QueryParams(query)
    if isinstance(query, QueryParams):
        values: Sequence[str] = query.getlist(key)
        return values[0] if values else None
    return query.get(key)


def is_watch_requested(value: str | None) -> bool:
    """A list becomes a watch when `watch` is present and not "0" or "false" (any case):
    Convert_Slice_string_To_bool, used both by the request-info parser and by ListOptions."""
    return value is not None and value.lower() not in ("0", "false")


def parse(method: str, path: str, query: Mapping[str, str] | QueryParams | bytes) -> RequestInfo:
    """RequestInfoFactory.NewRequestInfo. `/api/v1/namespaces/default/pods/web/status` is the update of
    pods/status of default/web; a GET without a name is a list, or a watch with ?watch; a DELETE without a
    name is a deletecollection; a `watch` segment makes the verb watch whatever the method; anything not
    under /api/<v>/ or /apis/<g>/<v>/ with at least one more segment is a non-resource request."""
    parts = _split_path(path)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return RequestInfo(path=path, verb=method.lower())
    prefix, rest = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(rest) < 3:
            return RequestInfo(path=path, verb=method.lower())
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    special = ""
    if rest[0] in SPECIAL_VERBS:
        if len(rest) < 2:
            # kube fails to build the request info ("unable to determine kind and namespace from url");
            # here it is a resource request naming no resource, which the router answers with 404.
            return RequestInfo(path=path, verb=rest[0], is_resource=True, api_prefix=prefix, group=group,
                               version=version, special_verb=rest[0])
        special, rest = rest[0], rest[1:]
        verb = special
    else:
        # Any other method is its own verb, lower-cased (OPTIONS of a proxy subresource is "options").
        verb = _METHOD_VERBS.get(method.upper(), method.lower())
    namespace = ""
    in_namespace_path = False
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        # /namespaces/NS/RESOURCE/...: the parts start at the resource; /namespaces/NAME/status is the
        # namespace's own subresource.
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
            in_namespace_path = True
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 and special not in SPECIAL_VERBS_WITHOUT_SUBRESOURCES else ""
    if not name and verb == "get":
        verb = "watch" if is_watch_requested(_first(query, "watch")) else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(path=path, verb=verb, is_resource=True, api_prefix=prefix, group=group, version=version,
                       namespace=namespace, resource=resource, subresource=subresource, name=name,
                       parts=tuple(rest), special_verb=special, in_namespace_path=in_namespace_path)


def of(scope: Scope) -> RequestInfo:
    """The request's RequestInfo, parsed on first use and kept in the scope for every later layer."""
    known: Any = scope.get(SCOPE_KEY)
    if isinstance(known, RequestInfo):
        return known
    info = parse(scope["method"], scope["path"], scope.get("query_string", b""))
    scope[SCOPE_KEY] = info
    return info


__all__ = ["READ_VERBS", "RequestInfo", "is_watch_requested", "of", "parse"]
