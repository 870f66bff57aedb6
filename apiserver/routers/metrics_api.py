"""metrics.k8s.io/v1beta1, as metrics-server serves it behind kube-apiserver: NodeMetrics and PodMetrics
made from every node's kubelet `/stats/summary` (nodeproxy.py's way to kubelets) when asked, never
stored — what `kubectl top nodes` and `kubectl top pods` read.

CPU is the kubelet's usageNanoCores (a rate over its last sampling window), memory its working set, as
metrics-server reports them; a node whose kubelet cannot be reached is left out, as metrics-server
leaves out a node it failed to scrape.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import Request
from starlette.responses import Response

from kubelab import kinds, timeutil
from kubelab.selectors import SelectorError, parse_field_selector, parse_label_selector

from .. import codecs, errors, nodeproxy
from ..requestinfo import RequestInfo
from . import proxy

GROUP = "metrics.k8s.io"
GROUP_VERSION = f"{GROUP}/v1beta1"
SCRAPE_TIMEOUT = 10.0
MAX_SUMMARY = 16 * 1024 * 1024


async def _summary(request: Request, node: dict[str, Any]) -> dict[str, Any] | None:
    try:
        location = nodeproxy.kubelet_location(node, address=request.app.state.config.kubelet_address)
        reader, writer = await proxy.dial(request, location)
    except errors.StatusError:
        return None
    try:
        writer.write(nodeproxy.request_head("GET", "/stats/summary", location, []))
        await writer.drain()
        head = await nodeproxy.read_response_head(reader, location)
        body = await nodeproxy.read_body(reader, head, MAX_SUMMARY)
        summary: dict[str, Any] = json.loads(body)
        return summary if head.status == 200 else None
    except (errors.StatusError, ValueError, OSError):
        return None
    finally:
        writer.close()


async def _summaries(request: Request, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async def bounded(node: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await asyncio.wait_for(_summary(request, node), SCRAPE_TIMEOUT)
        except TimeoutError:
            return None

    found = await asyncio.gather(*(bounded(n) for n in nodes))
    return [s for s in found if s is not None]


def _usage(stats: dict[str, Any]) -> dict[str, str]:
    cpu = int((stats.get("cpu") or {}).get("usageNanoCores") or 0)
    memory = int((stats.get("memory") or {}).get("workingSetBytes") or 0)
    return {"cpu": f"{cpu}n", "memory": f"{memory // 1024}Ki"}


def _window(summary: dict[str, Any]) -> str:
    return f"{summary.get('windowSeconds', 10)}s"


def _labels_match(request: Request, obj: dict[str, Any]) -> bool:
    try:
        selector = parse_label_selector(request.query_params.get("labelSelector"))
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    return selector.matches((obj.get("metadata") or {}).get("labels") or {})


async def serve(request: Request, info: RequestInfo) -> Response:
    if request.method != "GET":
        raise errors.method_not_allowed()
    rt = next((rt for rt in kinds.METRICS if rt.plural == info.resource), None)
    if rt is None or info.subresource or len(info.parts) > 2 or (rt is kinds.NODE_METRICS and info.namespace):
        raise errors.route_not_found()
    registry = request.app.state.registry
    everything, no_fields = parse_label_selector(None), parse_field_selector(None)
    nodes, _ = await registry.list(kinds.NODES, None, everything, no_fields)
    summaries = await _summaries(request, nodes)
    now = timeutil.rfc3339()
    if rt is kinds.NODE_METRICS:
        by_name = {n["metadata"]["name"]: n for n in nodes}
        items = [{"metadata": {"name": s["node"]["nodeName"], "creationTimestamp": now,
                               "labels": (by_name.get(s["node"]["nodeName"], {}).get("metadata") or {}).get("labels")},
                  "timestamp": s["node"]["cpu"]["time"], "window": _window(s), "usage": _usage(s["node"])}
                 for s in summaries if s["node"]["nodeName"] in by_name]
        missing = f'nodemetrics.metrics.k8s.io "{info.name}" not found'
    else:
        pods, _ = await registry.list(kinds.PODS, info.namespace or None, everything, no_fields)
        wanted = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        items = [{"metadata": {"name": p["podRef"]["name"], "namespace": p["podRef"]["namespace"],
                               "creationTimestamp": now,
                               "labels": (wanted[(p["podRef"]["namespace"], p["podRef"]["name"])].get("metadata")
                                          or {}).get("labels")},
                  "timestamp": p["cpu"]["time"], "window": _window(s),
                  "containers": [{"name": c["name"], "usage": _usage(c)} for c in p.get("containers") or []]}
                 for s in summaries for p in s.get("pods") or []
                 if (p["podRef"]["namespace"], p["podRef"]["name"]) in wanted]
        missing = f'podmetrics.metrics.k8s.io "{info.namespace}/{info.name}" not found'
    for item in items:
        if item["metadata"]["labels"] is None:
            del item["metadata"]["labels"]
    kind = rt.kind
    if info.name:
        named: dict[str, Any] | None = next((i for i in items if i["metadata"]["name"] == info.name), None)
        if named is None:
            raise errors.StatusError(404, "NotFound", missing, {"name": info.name, "group": GROUP,
                                                                "kind": rt.kind.lower()})
        return codecs.respond(request, {"kind": kind, "apiVersion": GROUP_VERSION, **named})
    selected = [{"kind": kind, "apiVersion": GROUP_VERSION, **i} for i in items if _labels_match(request, i)]
    return codecs.respond(request, {"kind": f"{kind}List", "apiVersion": GROUP_VERSION, "metadata": {},
                                    "items": [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")}
                                              for i in selected]})
