"""`kubelab ui`: a page of its own that draws the path of a Service, live.

Why a process of its own and not a path on the API server's port: the page shows each node's *real* rules,
read as `kubelab iptables` reads them (`ip netns exec <node> iptables-save` on the netns lab, the restored
rules file in render mode). That needs the cluster's data dir and, for netns, root and the node
namespaces; kube-apiserver never reaches into nodes, and kubelab's API server does not either. The UI
process is an API client like kubectl (it lists and watches with the data dir's token) and a reader of the
nodes' rules like `kubelab iptables`. It is read-only and listens on the loopback by default.

What it serves (JSON under /ui/v1/, the page under /):

* `overview`: nodes and their pods, from its informers' caches;
* `services?q=&limit=`: the Services matching a search (name, namespace/name, cluster IP), a page at a
  time, so 10k Services stay a list to search, never one drawing;
* `path?service=ns/name`: per node, that Service's entries -> KUBE-SVC -> each KUBE-SEP with its
  probability -> the DNAT destination, read from the node's rules now (rules.py), each destination
  joined to its pod and the pod's node;
* `trace?service=ns/name`: the Service's latest change (`kubelab trace`), for the waterfall;
* `events`: a server-sent event stream, one message per batch of watch events (which kinds changed, which
  Services), so the page re-reads what it shows when the cluster changes.

The static page (static/index.html, app.js, style.css) is plain files shipped in the package: nothing is
built, nothing comes from npm.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import kinds, tracing, wellknown
from ..client import ApiClient
from ..client.informer import Informer
from ..models import EndpointSlice, Node, Pod, Service
from .rules import parse_nat, service_path

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
MAX_LIMIT = 500  # Services per page of the list
MAX_KEYS_PER_EVENT = 200  # Services named in one event message; past it the page re-reads its list
EVENT_BATCH_SECONDS = 0.2  # watch events arriving together go out as one message

RulesReader = Callable[[str], Awaitable[str]]


class Subscriber:
    """One page's event stream: what changed since its last message."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.services: set[str] = set()
        self.overflow = False
        self.wake = asyncio.Event()

    def note(self, kind: str, service: str | None) -> None:
        self.kinds.add(kind)
        if service is not None:
            if len(self.services) < MAX_KEYS_PER_EVENT:
                self.services.add(service)
            else:
                self.overflow = True
        self.wake.set()

    def take(self) -> dict[str, Any]:
        message = {"kinds": sorted(self.kinds), "services": sorted(self.services), "overflow": self.overflow}
        self.kinds, self.services, self.overflow = set(), set(), False
        self.wake.clear()
        return message


class View:
    """The UI's state: four informers and the nodes' rules readers."""

    def __init__(self, api: ApiClient, *, nodes: list[str], read_rules: RulesReader) -> None:
        self.api = api
        self.node_names = nodes
        self.read_rules = read_rules
        self.services: Informer[Service] = Informer(api, kinds.SERVICES, name="ui-services")
        self.slices: Informer[EndpointSlice] = Informer(api, kinds.ENDPOINTSLICES, name="ui-slices")
        self.pods: Informer[Pod] = Informer(api, kinds.PODS, name="ui-pods")
        self.nodes: Informer[Node] = Informer(api, kinds.NODES, name="ui-nodes")
        self.subscribers: set[Subscriber] = set()
        self.services.add_handler(lambda e, old, new: self._changed("services", (new or old).key))
        self.slices.add_handler(lambda e, old, new: self._changed("endpointslices", _slice_service(new or old)))
        self.pods.add_handler(lambda e, old, new: self._changed("pods", None))
        self.nodes.add_handler(lambda e, old, new: self._changed("nodes", None))

    def _changed(self, kind: str, service: str | None) -> None:
        for subscriber in self.subscribers:
            subscriber.note(kind, service)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for informer in (self.services, self.slices, self.pods, self.nodes):
                tg.create_task(informer.run(), name=informer.name)

    # --- answers (pure over the caches, except the rules) ---------------------------------------

    def overview(self) -> dict[str, Any]:
        by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in sorted(self.pods.items(), key=lambda p: p.key):
            on = (pod.spec.node_name if pod.spec else None) or ""
            by_node.setdefault(on, []).append(_pod_summary(pod))
        names = sorted({*(n.metadata.name or "" for n in self.nodes.items()), *self.node_names})
        nodes = []
        for name in names:
            node = self.nodes.get(name)
            ready = any(c.type == "Ready" and c.status == "True"
                        for c in ((node.status.conditions if node and node.status else None) or []))
            nodes.append({"name": name, "ready": ready, "pods": by_node.pop(name, [])})
        return {"nodes": nodes, "unscheduled": by_node.pop("", []), "services": len(self.services.cache),
                "synced": all(i.has_synced() for i in (self.services, self.slices, self.pods, self.nodes))}

    def search(self, query: str, limit: int) -> dict[str, Any]:
        query = query.strip().lower()
        matched = [s for s in self.services.items()
                   if not query or query in s.key.lower() or query in ((s.spec.cluster_ip if s.spec else "") or "")]
        matched.sort(key=lambda s: s.key)
        ready: dict[str, int] = {}
        page = matched[:limit]
        wanted = {s.key for s in page}
        for slice_ in self.slices.items():
            service = _slice_service(slice_)
            if service in wanted:
                ready[service] = ready.get(service, 0) + sum(
                    1 for e in slice_.endpoints or [] if e.conditions is None or e.conditions.ready is not False)
        return {"total": len(self.services.cache), "matched": len(matched),
                "items": [{**_service_summary(s), "endpoints": ready.get(s.key, 0)} for s in page]}

    async def path(self, key: str) -> dict[str, Any] | None:
        service = self.services.get(key)
        if service is None:
            return None
        pods_by_ip = {}
        for pod in self.pods.items():
            for ip in {pod.status.pod_ip if pod.status else None,
                       *(p.ip for p in (pod.status.pod_ips if pod.status and pod.status.pod_ips else []))}:
                if ip:
                    pods_by_ip[ip] = pod

        async def one(node: str) -> dict[str, Any]:
            try:
                chains = parse_nat(await self.read_rules(node))
            except Exception as exc:  # noqa: BLE001 - a node whose rules cannot be read says so, the others show
                return {"node": node, "error": str(exc), "ports": []}
            ports = service_path(chains, key)
            for port in ports:
                for branch in port["branches"]:
                    ip = (branch["destination"] or "").rsplit(":", 1)[0]
                    pod = pods_by_ip.get(ip)
                    branch["pod"] = None if pod is None else {
                        "name": f"{pod.metadata.namespace}/{pod.metadata.name}",
                        "node": pod.spec.node_name if pod.spec else None}
            return {"node": node, "error": None, "ports": ports}

        nodes = await asyncio.gather(*(one(n) for n in self.node_names))
        return {"service": _service_summary(service), "nodes": list(nodes)}


def _slice_service(slice_: EndpointSlice | None) -> str | None:
    if slice_ is None:
        return None
    name = (slice_.metadata.labels or {}).get(wellknown.SERVICE_NAME)
    return f"{slice_.metadata.namespace}/{name}" if name else None


def _pod_summary(pod: Pod) -> dict[str, Any]:
    ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions if pod.status else None) or [])
    return {"name": f"{pod.metadata.namespace}/{pod.metadata.name}", "ip": pod.status.pod_ip if pod.status else None,
            "phase": pod.status.phase if pod.status else None, "ready": ready,
            "terminating": pod.metadata.deletion_timestamp is not None}


def _service_summary(service: Service) -> dict[str, Any]:
    spec = service.spec
    return {"key": service.key, "type": (spec.type if spec else None) or "ClusterIP",
            "clusterIP": spec.cluster_ip if spec else None,
            "ports": [{"name": p.name or "", "port": p.port, "protocol": p.protocol or "TCP", "nodePort": p.node_port}
                      for p in (spec.ports if spec else None) or []]}


def _limit(request: Request) -> int:
    try:
        return max(1, min(MAX_LIMIT, int(request.query_params.get("limit") or 200)))
    except ValueError:
        return 200


def build_app(view: View) -> Starlette:
    async def page(request: Request) -> Response:
        name = request.path_params.get("name") or "index.html"
        if name not in STATIC_FILES:
            return JSONResponse({"message": f"no such file: {name}"}, status_code=404)
        return FileResponse(STATIC / name, media_type=STATIC_FILES[name], headers={"Cache-Control": "no-cache"})

    async def overview(request: Request) -> Response:
        return JSONResponse(view.overview())

    async def services(request: Request) -> Response:
        return JSONResponse(view.search(request.query_params.get("q") or "", _limit(request)))

    async def path(request: Request) -> Response:
        key = request.query_params.get("service") or ""
        found = await view.path(key)
        if found is None:
            return JSONResponse({"message": f"no Service {key!r}"}, status_code=404)
        return JSONResponse(found)

    async def trace(request: Request) -> Response:
        key = request.query_params.get("service") or ""
        namespace, _, name = key.partition("/")
        if not namespace or not name:
            return JSONResponse({"message": "service must be namespace/name"}, status_code=400)
        try:
            result = await view.api.request("GET", tracing.PATH,
                                            params={"key": kinds.SERVICES.storage_key(namespace, name)})
        except Exception as exc:  # noqa: BLE001 - the waterfall is optional: say why it is missing
            return JSONResponse({"found": False, "message": str(exc), "steps": []})
        return JSONResponse(result)

    async def events(request: Request) -> Response:
        subscriber = Subscriber()
        view.subscribers.add(subscriber)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n"
                while True:
                    await subscriber.wake.wait()
                    await asyncio.sleep(EVENT_BATCH_SECONDS)
                    yield f"data: {json.dumps(subscriber.take())}\n\n"
            finally:
                view.subscribers.discard(subscriber)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return Starlette(routes=[
        Route("/", page), Route("/static/{name}", page),
        Route("/ui/v1/overview", overview), Route("/ui/v1/services", services), Route("/ui/v1/path", path),
        Route("/ui/v1/trace", trace), Route("/ui/v1/events", events),
    ])


def rules_reader(state: dict[str, Any], data_dir: Path) -> RulesReader:
    """How to read a node's nat rules, as `kubelab iptables` does for this cluster's dataplane."""
    nodes = state["nodes"]

    async def read(node: str) -> str:
        if state.get("dataplane") == "netns":
            proc = await asyncio.create_subprocess_exec(
                "ip", "netns", "exec", nodes[node]["netns"], "iptables-save", "-t", "nat",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"iptables-save in {nodes[node]['netns']}: {err.decode().strip()}")
            return out.decode()
        path = data_dir / "nodes" / node / "iptables.rules"
        if not path.exists():
            raise RuntimeError(f"node {node} has not synced yet")
        return await asyncio.to_thread(path.read_text)

    return read


async def serve(api: ApiClient, *, state: dict[str, Any], data_dir: Path, host: str, port: int,
                on_ready: Callable[[int], None] | None = None) -> None:
    import uvicorn

    view = View(api, nodes=sorted(state["nodes"]), read_rules=rules_reader(state, data_dir))
    config = uvicorn.Config(build_app(view), host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    # Ctrl-C and SIGTERM cancel this task (run_until_interrupted), as `kubelab up` runs its servers.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        if on_ready is not None:
            on_ready(bound)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(view.run(), name="ui-informers")
        tg.create_task(server.serve(), name="ui-http")
        tg.create_task(announce(), name="ui-announce")
