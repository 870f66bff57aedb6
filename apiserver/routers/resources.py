"""The REST verbs for every kind, at kube-apiserver's paths.

`/api/v1/...` and `/apis/<group>/<version>/...` are parsed here into (resource, namespace, name,
subresource) and handed to the registry. This module speaks HTTP — query parameters, content types,
status codes, Tables and watch streams — and nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kubelab import kinds, validation
from kubelab.kinds import ResourceType
from kubelab.selectors import SelectorError, parse_field_selector, parse_label_selector

from .. import (
    admission,
    codecs,
    errors,
    gojson,
    listoptions,
    offload,
    requestctx,
    requestinfo,
    saadmission,
    tables,
    traces,
)
from ..patch import PATCH_TYPES, apply_patch
from ..registry import Registry, apply, binding, scale
from ..registry.customresources import is_custom
from ..registry.store import parse_resource_version
from ..requestinfo import RequestInfo
from ..storage import cancelled_from_outside
from . import discovery, eviction, metrics_api, proxy, reviews, tokenrequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def _registry(request: Request) -> Registry:
    registry: Registry = request.app.state.registry
    return registry


def _resources(request: Request) -> tuple[ResourceType, ...]:
    resources: tuple[ResourceType, ...] = request.app.state.resources
    return resources


def resolve(request: Request, info: RequestInfo) -> Target:
    """The served kind and object a resource request names, from the request's one RequestInfo (the
    authorizer judged the same record). Paths kube's mux has no route for are 404: an unknown
    resource or subresource, a cluster-scoped kind under /namespaces/NS/, a namespaced kind named
    without its namespace, more segments than resource/name/subresource, the proxy verb. Routes that
    exist for other methods only are 405: a `watch/` path serves GET alone, and a namespaced kind
    across all namespaces (/api/v1/pods) serves only list and watch."""
    if not info.is_resource or not info.resource or info.special_verb not in ("", "watch"):
        raise errors.route_not_found()
    rt = next((rt for rt in _resources(request)
               if rt.group == info.group and rt.version == info.version and rt.plural == info.resource), None)
    # nodes|pods|services/NAME/proxy/PATH...: the rest of the path is the kubelet's or the pod's (proxy.py).
    proxying = rt is not None and rt in PROXIED and info.subresource == "proxy"
    if rt is None or (len(info.parts) > 3 and not proxying) or "" in info.parts[:3]:
        raise errors.route_not_found()
    name = info.name or None
    subresource = info.subresource or None
    if subresource and subresource not in rt.subresources:
        raise errors.route_not_found()
    if info.special_verb == "watch" and (request.method != "GET" or subresource):
        # /watch/... is registered for GET only: any other method there is kube's 405, never a write.
        if subresource:
            raise errors.route_not_found()
        raise errors.method_not_allowed()
    if rt.namespaced:
        if info.in_namespace_path and info.namespace:
            target = Target(rt, info.namespace, name, subresource)
        elif info.in_namespace_path or name is not None:
            raise errors.route_not_found()
        elif request.method != "GET":
            raise errors.method_not_allowed()
        else:
            target = Target(rt, None, None, None)
    elif info.in_namespace_path:
        raise errors.route_not_found()
    else:
        target = Target(rt, None, name, subresource)
    # Before any admission plugin is asked: a request with no route is answered by the mux alone.
    if request.method not in routed_methods(target):
        raise errors.method_not_allowed()
    return target


PROXIED = (kinds.NODES, kinds.PODS, kinds.SERVICES)
_METHOD_VERBS = {"GET": ("get", "list", "watch"), "POST": ("create",), "PUT": ("update",), "PATCH": ("patch",),
                 "DELETE": ("delete", "deletecollection")}


def routed_methods(target: Target) -> frozenset[str]:
    """The methods kube's installer registers for a path: a collection serves list/watch, create and
    deletecollection; an object get, update, patch and delete; status and scale get, update and patch;
    binding only create, finalize only update; each only where the kind has the verb."""
    if target.subresource in ("binding", "eviction", "token"):
        return frozenset({"POST"})
    if target.subresource == "finalize":
        return frozenset({"PUT"})
    if target.subresource == "log":
        return frozenset({"GET"})
    if target.subresource in proxy.POD_STREAMS:
        return frozenset({"GET", "POST"})
    if target.subresource == "proxy":
        return frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
    if target.subresource:
        methods = {"GET", "PUT", "PATCH"}
    elif target.name is not None:
        methods = {"GET", "PUT", "PATCH", "DELETE"}
    else:
        methods = {"GET", "POST", "DELETE"}
    verbs = set(target.rt.verbs)
    if target.name is None and "deletecollection" not in verbs:
        methods.discard("DELETE")
    return frozenset(m for m in methods if verbs.intersection(_METHOD_VERBS[m]) or target.subresource)


def _check_subresource(target: Target) -> None:
    if target.subresource and target.subresource not in target.rt.subresources:
        raise errors.route_not_found()


def _selectors(request: Request) -> tuple[Any, Any]:
    q = request.query_params
    try:
        return (parse_label_selector(listoptions.first(q, "labelSelector")),
                parse_field_selector(listoptions.first(q, "fieldSelector")))
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from exc


def _table_requested(request: Request) -> bool:
    accept = request.headers.get("accept") or ""
    return "as=Table" in accept


def _dry_run(request: Request) -> bool:
    values = request.query_params.getlist("dryRun")
    for v in values:
        if v != "All":
            raise errors.bad_request(f'Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def _list_kind(rt: ResourceType) -> str:
    return f"{rt.kind}List"


# --- the one route per API root ------------------------------------------------------------------
# Plain Starlette routes, not FastAPI endpoints: the path is parsed here anyway, and FastAPI's
# per-request dependency solving was a measurable share of every request's CPU (BENCHMARKS.md).

# HEAD and OPTIONS reach only the proxy subresources (routed_methods); elsewhere they are kube's 405.
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def serves(info: RequestInfo) -> bool:
    """Whether a request is one for dispatch: a resource request (its info parsed it so), except the
    trace endpoint, which has a FastAPI route of its own (observability.py)."""
    return info.is_resource and info.path != traces.PATH


async def resource_api(request: Request) -> Response:
    info = requestinfo.of(request.scope)
    if not info.is_resource and request.method == "GET":
        # `/api/v1/`, `/apis/apps/v1/`: kube trims the slash and serves the group version's discovery.
        return await discovery.group_version(request)
    return await dispatch(request, info)


# Installed first in the app's own route list (app.py), not through include_router: FastAPI's
# included routers are matched through a per-request wrapper that cost ~0.1 ms per request. The API
# server's front (app.ApiServer) sends resource requests to dispatch before any route is matched; these
# routes take the rest under /api and /apis: a GET of `/api/v1/` is discovery, anything else dispatch answers with 404.
routes = [Route("/api/{version}/{path:path}", resource_api, methods=list(METHODS)),
          Route("/apis/{group}/{version}/{path:path}", resource_api, methods=list(METHODS))]

_METRIC_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                 "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETECOLLECTION"}


def _metric_verb(request: Request, info: RequestInfo) -> str:
    """kube's request verbs for the metrics: LIST and WATCH apart from GET, APPLY apart from PATCH."""
    verb = _METRIC_VERBS.get(info.verb, request.method)
    if verb == "PATCH" and codecs.media_type(request) == APPLY_PATCH:
        return "APPLY"
    return verb


async def dispatch(request: Request, info: RequestInfo) -> Response:
    """Answer one resource request. `info` is the request's one parse (requestinfo.of), the very record
    the authorizer judged: what is served here is what was authorized."""
    start = time.perf_counter()
    traces.client.set(request.headers.get("user-agent") or "")
    target: Target | None = None
    metrics = getattr(request.app.state, "metrics", None)
    code = 500  # what a request cancelled before it was answered is observed as
    try:
        try:
            mode = request.query_params.get("fieldValidation") or "Warn"
            if mode not in requestctx.MODES:
                raise errors.bad_request(f'fieldValidation: Unsupported value: "{mode}": supported values: '
                                         '"Ignore", "Strict", "Warn"')
            requestctx.field_validation.set(mode)
            warnings = requestctx.start()
            if info.group == metrics_api.GROUP:  # served from the kubelets, not stored (metrics_api.py)
                return await metrics_api.serve(request, info)
            target = resolve(request, info)
            _warn_if_deprecated(request, target)
            admit = admission.of(request.scope)
            if admit is not None:
                await admit(request, info)
            response = await _dispatch(request, target, info)
            for name, value in requestctx.warning_headers(warnings):
                response.headers.append(name, value)
        except Exception as exc:  # noqa: BLE001 - every failure is answered with its Status (logged if unexpected)
            response = codecs.error_response(request, exc)
            if target is not None:
                # Warnings recorded before the failure go out with it, as kube's recorder writes them with
                # whatever response follows (a deprecated version's warning comes with its 404s too).
                for name, value in requestctx.warning_headers(requestctx.collected()):
                    response.headers.append(name, value)
        code = response.status_code
        if isinstance(response, StreamingResponse) and metrics is not None:
            # A watch is observed when its stream ends, as kube-apiserver observes it.
            assert target is not None
            _observe_at_end(response, metrics, request, target, info, start)
            metrics = None
        return response
    finally:
        if metrics is not None:
            _observe(metrics, request, target, info, code, time.perf_counter() - start)


def _warn_if_deprecated(request: Request, target: Target) -> None:
    """A request to a deprecated version is served with its warning (apiextensions' crdHandler adds a CRD
    version's deprecationWarning, or its default text, to every request of that version)."""
    strategy = _registry(request).strategies.get(target.rt)
    if strategy is not None and strategy.deprecation_warning:
        requestctx.warn(strategy.deprecation_warning)


def _observe(metrics: Any, request: Request, target: Target | None, info: RequestInfo, code: int,
             seconds: float) -> None:
    scope = "cluster"
    if target is not None:
        scope = "resource" if target.name is not None else "namespace" if target.namespace else "cluster"
    metrics.observe_request(_metric_verb(request, info), target.rt if target else None,
                            subresource=(target.subresource or "") if target else "", scope=scope,
                            dry_run=bool(request.query_params.get("dryRun")), code=code, seconds=seconds)


def _observe_at_end(response: StreamingResponse, metrics: Any, request: Request, target: Target,
                    info: RequestInfo, start: float) -> None:
    body = response.body_iterator

    async def observed() -> AsyncIterator[Any]:
        try:
            async for chunk in body:
                yield chunk
        finally:
            _observe(metrics, request, target, info, response.status_code, time.perf_counter() - start)

    response.body_iterator = observed()


async def _dispatch(request: Request, target: Target, info: RequestInfo) -> Response:
    method = request.method
    if target.rt == kinds.PODS and target.subresource in proxy.POD_SUBRESOURCES:
        assert target.namespace is not None and target.name is not None
        return await proxy.connect_pod(request, target.namespace, target.name, target.subresource)
    if target.subresource == "proxy" and target.name is not None:
        if target.rt == kinds.NODES:
            return await proxy.connect_node(request, target.name, info.parts[3:])
        assert target.namespace is not None
        if target.rt == kinds.PODS:
            return await proxy.connect_pod_proxy(request, target.namespace, target.name, info.parts[3:])
        return await proxy.connect_service_proxy(request, target.namespace, target.name, info.parts[3:])
    if target.rt == kinds.SELFSUBJECTACCESSREVIEWS:  # answered, never stored
        if method != "POST" or target.name is not None:
            raise errors.method_not_allowed()
        return await reviews.create_self_subject_access_review(request)
    if target.rt in (kinds.SUBJECTACCESSREVIEWS, kinds.LOCALSUBJECTACCESSREVIEWS, kinds.SELFSUBJECTRULESREVIEWS):
        if method != "POST" or target.name is not None:
            raise errors.method_not_allowed()
        if target.rt == kinds.SELFSUBJECTRULESREVIEWS:
            return await reviews.create_self_subject_rules_review(request)
        return await reviews.create_subject_access_review(request, target.rt, target.namespace)
    if target.rt == kinds.SELFSUBJECTREVIEWS:  # answered, never stored
        if method != "POST" or target.name is not None:
            raise errors.method_not_allowed()
        return await reviews.create_self_subject_review(request)
    if target.rt == kinds.TOKENREVIEWS:  # answered, never stored
        if method != "POST" or target.name is not None:
            raise errors.method_not_allowed()
        return await reviews.create_token_review(request)
    if method == "GET":
        # info.verb is watch for a `watch/` path (resolve let only GET through) and for a list with ?watch.
        if info.verb == "watch":
            return await watch(request, target)
        if target.name is None:
            return await list_objects(request, target)
        return await get_object(request, target)
    if method == "POST":
        if target.name is not None:
            if target.rt == kinds.PODS and target.subresource == "binding":
                return await bind_pod(request, target)
            if target.rt == kinds.PODS and target.subresource == "eviction":
                assert target.namespace is not None
                return await eviction.evict(request, target.namespace, target.name)
            if target.rt == kinds.SERVICEACCOUNTS and target.subresource == "token":
                assert target.namespace is not None
                return await tokenrequest.create_token(request, target.namespace, target.name)
            raise errors.method_not_allowed()
        return await create(request, target)
    if method == "PUT" and target.name is not None:
        return await replace(request, target)
    if method == "PATCH" and target.name is not None:
        return await patch(request, target)
    if method == "DELETE":
        if target.name is None:
            return await delete_collection(request, target)
        return await delete(request, target)
    raise errors.method_not_allowed()


# --- reads ---------------------------------------------------------------------------------------

async def get_object(request: Request, target: Target) -> Response:
    _check_subresource(target)
    obj = await _registry(request).get(target.rt, target.namespace, target.name or "")
    if target.subresource == "scale":
        return codecs.respond(request, scale.scale_of(target.rt, obj))
    if _table_requested(request):
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        return codecs.respond(request, tables.table(target.rt, [obj], rv,
                                                    include_object=listoptions.include_object(request.query_params)))
    return codecs.respond(request, obj)


def _list_options(request: Request, *, watch: bool) -> tuple[listoptions.ListOptions, Any, Any]:
    """The query as kube's handlers read it: numbers (400 with strconv's words), then the selectors
    (400), then ValidateListOptions (422)."""
    q = request.query_params
    options = listoptions.list_options(q)
    labels, fields = _selectors(request)
    problems = listoptions.list_errors(options, watch=watch)
    if problems:
        raise errors.invalid_options("ListOptions", problems)
    return options, labels, fields


async def list_objects(request: Request, target: Target) -> Response:
    options, labels, fields = _list_options(request, watch=False)
    page = await _registry(request).list_page(target.rt, target.namespace, labels, fields, options)
    # ListMeta: continue and remainingItemCount only on a page with more after it (omitempty).
    meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    if _table_requested(request):
        include = listoptions.include_object(request.query_params)
        table = await offload.run(page.size, lambda: tables.table(target.rt, page.items, str(page.revision),
                                                                  include_object=include))
        table["metadata"] = meta  # a Table pages as the list it was made from
        return await codecs.respond_sized(request, table, page.size)
    body = {"kind": _list_kind(target.rt), "apiVersion": target.rt.api_version, "metadata": meta,
            "items": page.items}
    return await codecs.respond_sized(request, body, page.size)


async def watch(request: Request, target: Target) -> Response:
    options, labels, fields = _list_options(request, watch=True)
    q = request.query_params
    if target.name is not None:
        # Legacy /watch/.../name: a watch of one object is a field-selected watch.
        fields = parse_field_selector(",".join(filter(None, [listoptions.first(q, "fieldSelector"),
                                                            f"metadata.name={target.name}"])))
    registry = _registry(request)
    # A bad selector or resourceVersion is a 400 before the stream starts, not an ERROR event in a 200.
    registry.matcher(target.rt, labels, fields)
    resource_version = options.resource_version
    parse_resource_version(resource_version)
    as_table = _table_requested(request)
    include_object = listoptions.include_object(q) if as_table else "Metadata"
    timeout = options.timeout_seconds
    if not timeout:
        # No timeoutSeconds (or 0): kube-apiserver ends the watch after minRequestTimeout * [1, 2).
        deadline = request.app.state.config.min_request_timeout * (1 + random.random())
    else:
        # A negative one is a context that has already expired: the watch ends at once, empty.
        deadline = float(max(timeout, 0))

    recorder: traces.TraceRecorder | None = getattr(request.app.state, "traces", None)
    metrics = getattr(request.app.state, "metrics", None)
    watcher = request.headers.get("user-agent") or "?"
    rt = target.rt

    async def stream() -> AsyncIterator[bytes]:
        first = True
        try:
            async with asyncio.timeout(deadline):
                async for event in registry.watch(target.rt, target.namespace, resource_version, labels, fields):
                    if as_table:
                        rv = (event.object.get("metadata") or {}).get("resourceVersion", "")
                        obj = tables.table(target.rt, [event.object], rv, include_object=include_object,
                                           with_columns=first)
                        first = False
                        line = codecs.encode_json({"type": event.type, "object": obj})
                    else:
                        line = event.line()  # encoded once for every watcher of this event
                    if recorder is not None and event.key:
                        recorder.deliver(event.key, event.revision, watcher)
                    if metrics is not None:
                        metrics.watch_event(rt, len(line))
                    yield line
        except TimeoutError:
            return
        except errors.StatusError as exc:
            yield codecs.encode_json({"type": "ERROR", "object": exc.status()})
        except Exception as exc:  # end the stream with a Status, never a broken chunk
            log.exception("watch of %s failed", target.rt.plural)
            yield codecs.encode_json({"type": "ERROR", "object": errors.internal(str(exc)).status()})
        except asyncio.CancelledError:
            if cancelled_from_outside():  # the client went away or the server stops: no one to tell
                raise
            log.exception("watch of %s was cancelled inside the server", target.rt.plural)
            yield codecs.encode_json({"type": "ERROR", "object": errors.internal(
                "the watch was cancelled inside the server").status()})

    return StreamingResponse(stream(), media_type="application/json",
                             headers={"Cache-Control": "no-cache, private", "Transfer-Encoding": "chunked"})


# --- writes --------------------------------------------------------------------------------------

async def _body(request: Request) -> Any:
    """A create's or an update's body, decoded (off the event loop when it is big). A patch's media
    types are no body for these: kube-apiserver's input negotiation answers them 415 with the types
    it does take."""
    content_type = codecs.media_type(request)
    if content_type in PATCH_TYPES:
        raise errors.unsupported_media_type(codecs.BODY_TYPES)
    return await _decode(content_type, await codecs.read_body(request))


async def _decode(content_type: str, raw: bytes) -> Any:
    offload.note_body(len(raw))
    return await offload.run(len(raw), codecs.decode, content_type, raw)


async def create(request: Request, target: Target) -> Response:
    custom = getattr(request.app.state, "custom_resources", None)
    if custom is not None and custom.is_terminating(target.rt):
        # crdHandler: no new objects while the definition's cleanup deletes the old ones.
        raise errors.method_not_allowed("create not allowed while custom resource definition is terminating")
    body = await _body(request)
    if target.rt == kinds.PODS and target.namespace and request.app.state.service_account_admission:
        body = await saadmission.admit(_registry(request), target.namespace, body,
                                       getter=getattr(request.app.state, "token_getter", None))
    obj = await _registry(request).create(target.rt, target.namespace, body, dry_run=_dry_run(request),
                                          manager=field_manager(request))
    return codecs.respond(request, obj, 201)


async def _rescale(request: Request, target: Target, replicas_of: Any, precondition: str | None = None
                   ) -> Response:
    return codecs.respond(request, await scale.rescale(
        _registry(request), target.rt, target.namespace, target.name or "", replicas_of, precondition=precondition,
        dry_run=_dry_run(request), manager=field_manager(request)))


async def replace(request: Request, target: Target) -> Response:
    _check_subresource(target)
    if target.subresource == "scale":
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("Scale in version \"v1\" cannot be handled as a Scale: the object provided is "
                                     "unrecognized")
        return await _rescale(request, target, lambda _scale: (body.get("spec") or {}).get("replicas", 0),
                              (body.get("metadata") or {}).get("resourceVersion") or None)
    body = await _body(request)
    obj = await _registry(request).update(target.rt, target.namespace, target.name or "", body,
                                          subresource=target.subresource, dry_run=_dry_run(request),
                                          manager=field_manager(request))
    return codecs.respond(request, obj)


async def patch(request: Request, target: Target) -> Response:
    _check_subresource(target)
    content_type = codecs.media_type(request)
    if content_type not in PATCH_TYPES or (is_custom(target.rt) and content_type == STRATEGIC_MERGE_PATCH):
        # Custom objects have no Go struct to take patch strategies from: kube's 415 lists what they take.
        raise errors.unsupported_media_type(CUSTOM_PATCH_TYPES if is_custom(target.rt) else PATCH_TYPES)
    patch_body = await _decode(content_type, await codecs.read_body(request))
    registry = _registry(request)
    dry_run = _dry_run(request)
    rt = target.rt
    if target.subresource == "scale":
        def replicas_of(current_scale: dict[str, Any]) -> Any:
            patched = apply_patch(content_type, current_scale, patch_body, "Scale")
            return (patched.get("spec") or {}).get("replicas", 0)
        return await _rescale(request, target, replicas_of)
    if content_type == APPLY_PATCH:
        return await server_side_apply(request, target, patch_body, dry_run)
    if request.query_params.get("force") is not None:
        raise errors.invalid_options("PatchOptions", [validation.forbidden(
            "force", "may not be specified for non-apply patch")])

    precondition = None
    if isinstance(patch_body, dict):
        precondition = (patch_body.get("metadata") or {}).get("resourceVersion") if isinstance(
            patch_body.get("metadata"), dict) else None

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        patched = apply_patch(content_type, current, patch_body, rt.kind)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        return patched

    obj = await registry.guaranteed_update(rt, target.namespace, target.name or "", mutate,
                                           subresource=target.subresource, dry_run=dry_run,
                                           precondition=precondition, manager=field_manager(request))
    return codecs.respond(request, obj)


APPLY_PATCH = "application/apply-patch+yaml"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
CUSTOM_PATCH_TYPES = tuple(t for t in PATCH_TYPES if t != STRATEGIC_MERGE_PATCH)


async def server_side_apply(request: Request, target: Target, config: Any, dry_run: bool) -> Response:
    """PATCH with application/apply-patch+yaml, its options read from the query (registry/apply.py)."""
    q = request.query_params
    obj, code = await apply.server_side_apply(_registry(request), target.rt, target.namespace, target.name or "",
                                              config, manager=q.get("fieldManager") or "",
                                              force=q.get("force") == "true", subresource=target.subresource,
                                              dry_run=dry_run)
    return codecs.respond(request, obj, code)


def field_manager(request: Request) -> str:
    """The request's field manager: fieldManager, else the user agent up to its first `/`
    (kubectl/v1.32.4 ... -> "kubectl"), as kube-apiserver names unnamed managers."""
    manager = request.query_params.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("user-agent") or ""
    return agent.split("/", 1)[0][:128] or "unknown"


# DeleteOptions fields with their JSON and Go types: a body the Go decoder would refuse is a 400 here too,
# never a 500 and never a delete that ignores what the client asked for.
_DELETE_OPTIONS: dict[str, tuple[type, str]] = {
    "apiVersion": (str, "string"), "kind": (str, "string"), "gracePeriodSeconds": (int, "int64"),
    "propagationPolicy": (str, "v1.DeletionPropagation"), "orphanDependents": (bool, "bool"),
    "preconditions": (dict, "v1.Preconditions"), "dryRun": (list, "[]string")}


def _delete_options_error(message: str) -> errors.StatusError:
    return errors.bad_request(f'DeleteOptions in version "v1" cannot be handled as a DeleteOptions: {message}')


def _check_delete_options(options: Any) -> dict[str, Any]:
    if not isinstance(options, dict):
        raise _delete_options_error(f"json: cannot unmarshal {gojson.type_name(options)} into Go value of type "
                                    "v1.DeleteOptions")
    for key, (want, go_type) in _DELETE_OPTIONS.items():
        value = options.get(key)
        if value is None:
            continue
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise _delete_options_error(f"json: cannot unmarshal {gojson.type_name(value)} into Go struct field "
                                        f"DeleteOptions.{key} of type {go_type}")
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise _delete_options_error(f"json: cannot unmarshal number {value} into Go struct field "
                                        f"DeleteOptions.{key} of type {go_type}")
    for key in ("uid", "resourceVersion"):
        value = (options.get("preconditions") or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise _delete_options_error(f"json: cannot unmarshal {gojson.type_name(value)} into Go struct field "
                                        f"Preconditions.preconditions.{key} of type string")
    if any(not isinstance(value, str) for value in options.get("dryRun") or []):
        raise _delete_options_error("json: cannot unmarshal non-string into Go struct field DeleteOptions.dryRun of "
                                    "type string")
    return options


async def _delete_options(request: Request) -> dict[str, Any]:
    """The DeleteOptions of a DELETE as kube's handler reads them: from the body when there is one, else
    from the query (its numbers parsed as Go parses them: a bad gracePeriodSeconds is 400 with
    strconv's words); then ValidateDeleteOptions (422 `DeleteOptions.meta.k8s.io "" is invalid`)."""
    raw = await codecs.read_body(request)
    if raw.strip():
        options = _check_delete_options(codecs.decode(codecs.media_type(request), raw))
    else:
        options = listoptions.delete_options_from_query(request.query_params)
    problems = listoptions.delete_errors(options)
    if problems:
        raise errors.invalid_options("DeleteOptions", problems)
    return options


async def delete(request: Request, target: Target) -> Response:
    if target.subresource:
        raise errors.method_not_allowed()
    options = await _delete_options(request)
    obj = await _registry(request).delete(target.rt, target.namespace, target.name or "",
                                          preconditions=options.get("preconditions"),
                                          dry_run=bool(options.get("dryRun")), options=options)
    return codecs.respond(request, obj)


async def delete_collection(request: Request, target: Target) -> Response:
    if "deletecollection" not in target.rt.verbs:
        raise errors.method_not_allowed()
    options = await _delete_options(request)
    labels, fields = _selectors(request)
    registry = _registry(request)
    items, revision = await registry.list(target.rt, target.namespace, labels, fields)
    deleted = []
    for item in items:
        meta = item.get("metadata") or {}
        try:
            deleted.append(await registry.delete(target.rt, meta.get("namespace"), meta.get("name", ""),
                                                 dry_run=bool(options.get("dryRun")), options=options))
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
    return codecs.respond(request, {"kind": _list_kind(target.rt), "apiVersion": target.rt.api_version,
                                    "metadata": {"resourceVersion": str(revision)}, "items": deleted})


async def bind_pod(request: Request, target: Target) -> Response:
    """POST pods/NAME/binding: what the scheduler calls to place a pod on a node (registry/binding.py)."""
    await binding.bind_pod(_registry(request), target.namespace, target.name or "", await _body(request),
                           dry_run=_dry_run(request))
    return codecs.respond(request, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "code": 201}, 201)
