"""GET /metrics (kube-apiserver's metrics, metrics.py) and kubelab's trace endpoint (traces.py).

`/apis/kubelab.dev/v1alpha1/traces` is kubelab's own and deliberately absent from discovery
(`/apis` lists only the standard groups, so kubectl and the Python client never see it):

* `POST` a component's milestone (a JSON object, see `TraceRecorder.report`) -> 201;
* `GET ?key=/registry/<resource>/<namespace>/<name>` -> the timeline of the object's latest change;
* `GET ?type=proxy-sync` (or `endpoints`) -> the raw reports of that type still in the ring.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.routing import Route

from .. import codecs, errors, traces
from ..metrics import CONTENT_TYPE

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    registry = getattr(request.app.state, "metrics", None)
    if registry is None:
        raise errors.route_not_found()
    return Response(registry.exposition(), media_type=CONTENT_TYPE)


def _recorder(request: Request) -> traces.TraceRecorder:
    recorder: traces.TraceRecorder | None = getattr(request.app.state, "traces", None)
    if recorder is None:
        raise errors.route_not_found()
    return recorder


async def report(request: Request) -> Response:
    recorder = _recorder(request)
    raw = await codecs.read_body(request)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.bad_request(f"the trace report is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise errors.bad_request("a trace report is a JSON object")
    try:
        recorder.report(body, request.headers.get("user-agent") or "")
    except ValueError as exc:
        raise errors.bad_request(f"invalid trace report: {exc}") from None
    return codecs.respond(request, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "code": 201}, 201)


def _raw(record: dict[str, Any]) -> dict[str, Any]:
    """A report as JSON: its causes or applied changes as [key, revision] pairs, in order."""
    return {k: sorted([list(p) for p in v]) if isinstance(v, frozenset) else v for k, v in record.items()}


async def trace(request: Request) -> Response:
    recorder = _recorder(request)
    kind = request.query_params.get("type")
    if kind is not None:
        # The raw reports of one type (bench/netprog.py computes latencies per change from them).
        if kind not in traces.REPORT_TYPES:
            raise errors.bad_request(f"type must be one of {', '.join(traces.REPORT_TYPES)}")
        return codecs.respond(request, {"items": [_raw(r) for r in recorder.reports if r["type"] == kind]})
    key = request.query_params.get("key") or ""
    if not key.startswith("/registry/"):
        raise errors.bad_request("key must be an object's storage key, /registry/<resource>/[<namespace>/]<name>")
    result: dict[str, Any] = traces.timeline(recorder, key)
    return codecs.respond(request, result)


# Plain routes, installed ahead of the resource routes (app.py).
routes = [Route(traces.PATH, report, methods=["POST"]), Route(traces.PATH, trace, methods=["GET"])]
