"""Discovery and OpenAPI endpoints: what kubectl reads before it touches any resource."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from kubelab import kinds

from .. import aggregated, codecs, discovery, errors

# kube serves every discovery document at its path with a trailing slash too (go-restful matches
# `/version/`, `/apis/apps/`; the discovery handlers are registered at `/apis` and `/apis/`): 200 with the
# document, never Starlette's 307 to the path without the slash (app.py turns those off). `/api/v1/` and `/apis/apps/v1/` reach
# the resource routes first (resources.resource_api), which answer them with group_version below.
router = APIRouter()


def _resources(request: Request):  # type: ignore[no-untyped-def]
    return request.app.state.resources


def _discoverable(request: Request):  # type: ignore[no-untyped-def]
    """What discovery lists: the stored kinds and metrics.k8s.io (served from the kubelets, metrics_api.py)."""
    return (*request.app.state.resources, *kinds.METRICS)


@router.get("/version")
@router.get("/version/")
async def version(request: Request) -> Response:
    # kube-apiserver writes /version with WriteRawJSON: indented by two spaces, no final line feed.
    body = codecs.go_escape(orjson.dumps(discovery.version(), option=orjson.OPT_INDENT_2))
    return Response(body, media_type="application/json")


def _aggregated(request: Request, *, core: bool) -> Response | None:
    """The aggregated document when the Accept header asks for it (kube's WrappedHandler), with kube's
    ETag, `Vary: Accept` and `Cache-Control: public`, and a bodiless 304 when If-None-Match holds the ETag;
    None: serve the legacy document."""
    negotiated = aggregated.negotiate(request.headers.get("accept"))
    if negotiated is None:
        return None
    resources = request.app.state.resources
    document = aggregated.document(resources if core else (*resources, *kinds.METRICS), core=core)
    headers = {"ETag": f'"{document.etag}"', "Vary": "Accept", "Cache-Control": "public"}
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    return Response(document.encode(negotiated), media_type=negotiated.content_type, headers=headers)


@router.get("/api")
@router.get("/api/")
async def api(request: Request) -> Response:
    if (answer := _aggregated(request, core=True)) is not None:
        return answer
    host = request.url.hostname or "127.0.0.1"
    port = request.url.port or 80
    return codecs.respond(request, discovery.api_versions(f"{host}:{port}"))


@router.get("/apis")
@router.get("/apis/")
async def apis(request: Request) -> Response:
    if (answer := _aggregated(request, core=False)) is not None:
        return answer
    return codecs.respond(request, discovery.api_group_list(_discoverable(request)))


@router.get("/api/{version}")
@router.get("/api/{version}/")
async def core_resources(request: Request, version: str) -> Response:
    body = discovery.api_resource_list(version, _resources(request))
    if body is None:
        raise errors.route_not_found()
    return codecs.respond(request, body)


@router.get("/apis/{group}")
@router.get("/apis/{group}/")
async def group(request: Request, group: str) -> Response:
    body = discovery.api_group(group, _discoverable(request))
    if body is None:
        raise errors.route_not_found()
    return codecs.respond(request, body)


@router.get("/apis/{group}/{version}")
@router.get("/apis/{group}/{version}/")
async def group_resources(request: Request, group: str, version: str) -> Response:
    body = discovery.api_resource_list(f"{group}/{version}", _discoverable(request))
    if body is None:
        raise errors.route_not_found()
    return codecs.respond(request, body)


async def group_version(request: Request) -> Response:
    """`/api/v1/`, `/apis/apps/v1/`: the group version's resource list, as without the slash."""
    group, version = request.path_params.get("group"), request.path_params["version"]
    if group is None:
        return await core_resources(request, version)
    return await group_resources(request, group, version)


@router.get("/openapi/v2")
async def openapi_v2(request: Request) -> Response:
    accept = request.headers.get("accept", "")
    if any(media_type in accept for media_type in discovery.OPENAPI_V2_PROTOBUF):
        # kube-openapi answers both spellings with the one Go's mime package can parse (no "@").
        return Response(discovery.openapi_v2_protobuf(), media_type=discovery.OPENAPI_V2_PROTOBUF[1])
    return codecs.respond(request, discovery.openapi_v2())


@router.get("/openapi/v3")
async def openapi_index(request: Request) -> Response:
    return codecs.respond(request, discovery.openapi_index(_resources(request)))


@router.get("/openapi/v3/api/{version}")
async def openapi_core(request: Request, version: str) -> Response:
    body = discovery.openapi_group_version(version, _resources(request))
    if body is None:
        raise errors.route_not_found()
    return codecs.respond(request, body)


@router.get("/openapi/v3/apis/{group}/{version}")
async def openapi_group(request: Request, group: str, version: str) -> Response:
    body = discovery.openapi_group_version(f"{group}/{version}", _resources(request))
    if body is None:
        raise errors.route_not_found()
    return codecs.respond(request, body)
