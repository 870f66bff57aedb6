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
  joined to its pod and the pod's node; on a node whose proxy runs nftables mode, the map elements ->
  service chain -> `numgen random mod N vmap` -> each endpoint chain with its share 1/N (nft.py);
* `pod?name=ns/name`: `kubelab explain pod` on the page: every node's scheduler verdict and scores
  (scheduler/explain.py, handed in by the CLI: the core imports no component), and for each node how a
  packet to each Service port that has this pod as an endpoint is handled there (the branch to it);
* `trace?service=ns/name`: the Service's latest change (`kubelab trace`), for the waterfall;
* `events`: a server-sent event stream, one message per batch of changes (which kinds changed, which
  Services, which nodes' rules), so the page re-reads what it shows when the cluster changes.

When a node's rules change, the page hears it from the kernel, not from a timer: on the netns lab the
UI runs `nft monitor` in every node's namespace (iptables 1.8 is nf_tables underneath, so it reports
iptables-restore and `nft -f` alike) and says "node X's rules changed" as the agent's transaction lands;
in render mode it watches the rules file the agent replaces at each sync. Because the monitor hears every
commit once it is subscribed, a node's rules read since its last change are kept: after one node's commit
the page's next path read runs `iptables-save` in that node only (under load a read of every node took
most of the page's share of delete-to-branch-gone).

The static page (static/index.html, app.js, style.css) is plain files shipped in the package: nothing is
built, nothing comes from npm.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import kinds, tracing, wellknown
from ..client import ApiClient
from ..client.informer import Informer
from ..models import EndpointSlice, Node, Pod, Service
from . import nft
from .rules import parse_nat, service_path

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
MAX_LIMIT = 500  # Services per page of the list
MAX_KEYS_PER_EVENT = 200  # Services named in one event message; past it the page re-reads its list
# At most one event message per this many seconds to a page; the first change after a quiet spell goes
# out at once (a leading edge, as kube-proxy's burst lets its first sync run at once), the changes that
# arrive within the interval after it go out together at its end.
EVENT_MIN_INTERVAL_SECONDS = 0.05
RULES_FILE_POLL_SECONDS = 0.1  # render mode: how often the agent's rules file is stat()ed
MONITOR_RESTART_SECONDS = 1.0  # a node's `nft monitor` that ended is started again after this
MONITOR_SUBSCRIBED_POLL_SECONDS = 0.01  # until a started `nft monitor` has joined the kernel's groups
MONITOR_SUBSCRIBED_TIMEOUT_SECONDS = 30.0

# A node's rules as (proxy mode, text): iptables-save text, or `nft -j list table ip kube-proxy` JSON.
RulesReader = Callable[[str], Awaitable[tuple[str, str]]]
# Waits for the next change of a node's rules, calling back each time (runs until cancelled). The callback's
# argument says whether the watcher now hears every change of that node (the kernel's monitor is subscribed):
# only then may a read of the node's rules be kept until the next call.
RulesWatcher = Callable[[str, Callable[[bool], None]], Coroutine[Any, Any, None]]
# scheduler/explain.py's explain() as a plain dict: (pod, nodes, pods) -> Explanation.
PodExplainer = Callable[[Pod, list[Node], list[Pod]], dict[str, Any]]


class Subscriber:
    """One page's event stream: what changed since its last message."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.services: set[str] = set()
        self.nodes: set[str] = set()
        self.overflow = False
        self.wake = asyncio.Event()

    def note_rules(self, node: str) -> None:
        self.kinds.add("rules")
        self.nodes.add(node)
        self.wake.set()

    def note(self, kind: str, service: str | None) -> None:
        self.kinds.add(kind)
        if service is not None:
            if len(self.services) < MAX_KEYS_PER_EVENT:
                self.services.add(service)
            else:
                self.overflow = True
        self.wake.set()

    def take(self) -> dict[str, Any]:
        message = {"kinds": sorted(self.kinds), "services": sorted(self.services), "nodes": sorted(self.nodes),
                   "overflow": self.overflow}
        self.kinds, self.services, self.nodes, self.overflow = set(), set(), set(), False
        self.wake.clear()
        return message


class View:
    """The UI's state: four informers and the nodes' rules readers."""

    def __init__(self, api: ApiClient, *, nodes: list[str], read_rules: RulesReader,
                 watch_rules: RulesWatcher | None = None, explain_pod: PodExplainer | None = None) -> None:
        self.api = api
        self.node_names = nodes
        self.read_rules = read_rules
        self.watch_rules = watch_rules
        self.explain_pod = explain_pod
        self.services: Informer[Service] = Informer(api, kinds.SERVICES, name="ui-services")
        self.slices: Informer[EndpointSlice] = Informer(api, kinds.ENDPOINTSLICES, name="ui-slices")
        self.pods: Informer[Pod] = Informer(api, kinds.PODS, name="ui-pods")
        self.nodes: Informer[Node] = Informer(api, kinds.NODES, name="ui-nodes")
        self.subscribers: set[Subscriber] = set()
        # Per node: the generation its last read started at, what it read, and that text parsed.
        self._parsed: dict[str, tuple[int, tuple[str, str], Callable[[str], list[dict[str, Any]]]]] = {}
        # Per node: how many changes its watcher has reported, and whether it hears every change now.
        self._generation: dict[str, int] = {}
        self._heard: dict[str, bool] = {}
        self.services.add_handler(lambda e, old, new: self._changed("services", (new or old).key))
        self.slices.add_handler(lambda e, old, new: self._changed("endpointslices", _slice_service(new or old)))
        self.pods.add_handler(lambda e, old, new: self._changed("pods", None))
        self.nodes.add_handler(lambda e, old, new: self._changed("nodes", None))

    def _changed(self, kind: str, service: str | None) -> None:
        for subscriber in self.subscribers:
            subscriber.note(kind, service)

    def _rules_changed(self, node: str, listening: bool = False) -> None:
        self._generation[node] = self._generation.get(node, 0) + 1
        self._heard[node] = listening
        for subscriber in self.subscribers:
            subscriber.note_rules(node)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for informer in (self.services, self.slices, self.pods, self.nodes):
                tg.create_task(informer.run(), name=informer.name)
            if self.watch_rules is not None:
                for node in self.node_names:
                    tg.create_task(self.watch_rules(node, functools.partial(self._rules_changed, node)),
                                   name=f"ui-rules-{node}")

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

    def _pods_by_ip(self) -> dict[str, Pod]:
        found = {}
        for pod in self.pods.items():
            for ip in {pod.status.pod_ip if pod.status else None,
                       *(p.ip for p in (pod.status.pod_ips if pod.status and pod.status.pod_ips else []))}:
                if ip:
                    found[ip] = pod
        return found

    async def _paths(self, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Per Service key, per node: {"node", "mode", "error", "ports"} from each node's rules, read once
        per node for all the keys; each branch's destination joined to its pod."""
        pods_by_ip = self._pods_by_ip()

        async def one(node: str) -> dict[str, dict[str, Any]]:
            try:
                generation = self._generation.get(node, 0)
                cached = self._parsed.get(node)
                if cached is not None and cached[0] == generation and self._heard.get(node):
                    # Nothing changed on that node since a read that began while its monitor listened: on the
                    # netns lab a read is an `ip netns exec ... iptables-save` per node, and after one node's
                    # commit the page's path read waits only for that node's, not every node's.
                    mode, ports_of = cached[1][0], cached[2]
                else:
                    mode, text = await self.read_rules(node)
                    if cached is not None and cached[1] == (mode, text):
                        ports_of = cached[2]
                    else:
                        # Parsed off the loop (60,000 rules at 10k Services), and kept while the node's rules
                        # stay the same text: opening another Service costs a read, not a parse.
                        ports_of = await asyncio.to_thread(_path_reader, mode, text)
                    # The generation from before the read: a change during it makes the next path read again.
                    self._parsed[node] = (generation, (mode, text), ports_of)
            except Exception as exc:  # noqa: BLE001 - a node whose rules cannot be read says so, the others show
                return {key: {"node": node, "mode": None, "error": str(exc), "ports": []} for key in keys}
            out = {}
            for key in keys:
                ports = ports_of(key)
                for port in ports:
                    for branch in port["branches"]:
                        pod = pods_by_ip.get(_host_of(branch["destination"] or ""))
                        branch["pod"] = None if pod is None else {
                            "name": f"{pod.metadata.namespace}/{pod.metadata.name}",
                            "node": pod.spec.node_name if pod.spec else None}
                out[key] = {"node": node, "mode": mode, "error": None, "ports": ports}
            return out

        per_node = await asyncio.gather(*(one(n) for n in self.node_names))
        return {key: [found[key] for found in per_node] for key in keys}

    async def path(self, key: str) -> dict[str, Any] | None:
        service = self.services.get(key)
        if service is None:
            return None
        nodes = (await self._paths([key]))[key]
        return {"service": _service_summary(service), "nodes": nodes}

    async def pod(self, key: str) -> dict[str, Any] | None:
        """`kubelab explain pod` for the page: the scheduler's verdict on every node, and on every node
        how a packet to each Service port with this pod as an endpoint is handled (the branch to it)."""
        pod = self.pods.get(key)
        if pod is None:
            return None
        scheduling: dict[str, Any] | None = None
        if self.explain_pod is not None:
            # As `kubelab explain` lists them: the pods that still hold resources.
            others = [p for p in self.pods.items() if not (p.status and p.status.phase in ("Succeeded", "Failed"))]
            try:
                scheduling = self.explain_pod(pod, list(self.nodes.items()), others)
            except Exception as exc:  # noqa: BLE001 - the packet half still shows; say why this half does not
                scheduling = {"error": str(exc)}
        ips = {pod.status.pod_ip if pod.status else None,
               *(p.ip for p in (pod.status.pod_ips if pod.status and pod.status.pod_ips else []))} - {None}
        services = sorted({service for slice_ in self.slices.items()
                           if (service := _slice_service(slice_)) is not None and _lists(slice_, pod, ips)})
        paths = await self._paths(services)
        reaching = []
        for service in services:
            rows = []
            for found in paths[service]:
                for port in found["ports"]:
                    mine = [b for b in port["branches"] if _host_of(b["destination"] or "") in ips]
                    rows.append({"node": found["node"], "mode": found["mode"], "port": port["port"],
                                 "entries": port["entries"], "chain": port["chain"], "numgen": port.get("numgen"),
                                 "branches": len(port["branches"]), "branch": mine[0] if mine else None})
                if found["error"] or not found["ports"]:
                    rows.append({"node": found["node"], "mode": found["mode"], "port": None, "entries": [],
                                 "chain": None, "numgen": None, "branches": 0, "branch": None,
                                 "error": found["error"] or "no rule of this Service on this node"})
            reaching.append({"service": service, "rows": rows})
        return {"pod": {**_pod_summary(pod), "node": pod.spec.node_name if pod.spec else None},
                "scheduling": scheduling, "services": reaching}


def _path_reader(mode: str, text: str) -> Callable[[str], list[dict[str, Any]]]:
    """A node's rules parsed once, as a function from a Service key to its path on that node."""
    if mode == "nftables":
        table = nft.parse_table(text)
        return lambda key: nft.service_path(table, key)
    chains = parse_nat(text)
    return lambda key: service_path(chains, key)


def _lists(slice_: EndpointSlice, pod: Pod, ips: set[str | None]) -> bool:
    """Whether the slice has an endpoint for this pod: by its targetRef, or by one of its addresses."""
    for endpoint in slice_.endpoints or []:
        ref = endpoint.target_ref
        if ref is not None and ref.kind == "Pod" and ref.name == pod.metadata.name \
                and slice_.metadata.namespace == pod.metadata.namespace:
            return True
        if ips & set(endpoint.addresses or []):
            return True
    return False


def _host_of(destination: str) -> str:
    """The address of a DNAT destination: "10.0.0.1:80" -> 10.0.0.1, "[fd00::1]:80" -> fd00::1."""
    if destination.startswith("["):
        return destination[1:].partition("]")[0]
    return destination.rsplit(":", 1)[0] if destination.count(":") == 1 else destination


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

    async def pod(request: Request) -> Response:
        key = request.query_params.get("name") or ""
        found = await view.pod(key)
        if found is None:
            return JSONResponse({"message": f"no pod {key!r}"}, status_code=404)
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
            loop = asyncio.get_running_loop()
            sent = float("-inf")
            try:
                yield "retry: 1000\n\n"
                while True:
                    await subscriber.wake.wait()
                    if (wait := sent + EVENT_MIN_INTERVAL_SECONDS - loop.time()) > 0:
                        await asyncio.sleep(wait)
                    yield f"data: {json.dumps(subscriber.take())}\n\n"
                    sent = loop.time()
            finally:
                view.subscribers.discard(subscriber)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return Starlette(routes=[
        Route("/", page), Route("/static/{name}", page),
        Route("/ui/v1/overview", overview), Route("/ui/v1/services", services), Route("/ui/v1/path", path), Route("/ui/v1/pod", pod),
        Route("/ui/v1/trace", trace), Route("/ui/v1/events", events),
    ])


class EndQuietlyOnStop:
    """The page's app, except that a request cancelled because the UI stops ends with an answer instead of
    raising. Ctrl-C or SIGTERM cancel every task (run_until_interrupted), the requests in flight with them
    (a path read waiting for `iptables-save`); uvicorn logs whatever leaves the app, CancelledError too,
    as "Exception in ASGI application" with a traceback, and answers 500 to what it left unanswered. A
    stop is no error: the request gets 503 (or, its answer begun, its end), and nothing is logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if scope["type"] != "http" or task is None or not task.cancelling():
                raise
            task.uncancel()  # taken: the answer below is sent
            if not started:
                body = json.dumps({"message": "kubelab ui is stopping"}).encode()
                await send({"type": "http.response.start", "status": 503,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[4:])} in {argv[3]}: {err.decode().strip()}")
    return out.decode()


def rules_reader(state: dict[str, Any], data_dir: Path) -> RulesReader:
    """How to read a node's rules, as `kubelab iptables` and `kubelab nftables` do for this cluster's
    dataplane and proxy mode (cluster.json's proxyMode; iptables when absent, kube-proxy's default)."""
    nodes = state["nodes"]
    mode = state.get("proxyMode") or "iptables"

    async def read(node: str) -> tuple[str, str]:
        if state.get("dataplane") == "netns":
            netns = nodes[node]["netns"]
            if mode == "nftables":
                return mode, await _run("ip", "netns", "exec", netns, "nft", "-j", "list", "table", "ip", "kube-proxy")
            return mode, await _run("ip", "netns", "exec", netns, "iptables-save", "-t", "nat")
        if mode == "nftables":
            raise RuntimeError("the nftables view reads the kernel's table (`nft -j list table ip kube-proxy`): "
                               "it needs the netns dataplane")
        path = data_dir / "nodes" / node / "iptables.rules"
        if not path.exists():
            raise RuntimeError(f"node {node} has not synced yet")
        return mode, await asyncio.to_thread(path.read_text)

    return read


async def _subscribed(proc: asyncio.subprocess.Process) -> bool:
    """Whether `nft monitor` (the process itself: `ip netns exec` execs it) has joined nf_tables' netlink
    multicast groups: one of its sockets (/proc/PID/fd) is listed in /proc/PID/net/netlink, the sockets of
    its network namespace, as NETLINK_NETFILTER with non-zero groups. False when it cannot be told within
    MONITOR_SUBSCRIBED_TIMEOUT_SECONDS or the process ended."""
    deadline = asyncio.get_running_loop().time() + MONITOR_SUBSCRIBED_TIMEOUT_SECONDS
    while proc.returncode is None and asyncio.get_running_loop().time() < deadline:
        with contextlib.suppress(OSError, ValueError):
            fds = Path(f"/proc/{proc.pid}/fd")
            inodes = {link.removeprefix("socket:[").removesuffix("]") for link in (
                os.readlink(fd) for fd in fds.iterdir()) if link.startswith("socket:[")}
            for line in Path(f"/proc/{proc.pid}/net/netlink").read_text().splitlines()[1:]:
                fields = line.split()  # sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
                if len(fields) >= 10 and fields[1] == "12" and int(fields[3], 16) and fields[9] in inodes:
                    return True
        await asyncio.sleep(MONITOR_SUBSCRIBED_POLL_SECONDS)
    return False


def rules_watcher(state: dict[str, Any], data_dir: Path) -> RulesWatcher:
    """How to hear that a node's rules changed. netns: `nft monitor` in the node's namespace, which the
    kernel feeds each committed change (iptables 1.8's nf_tables backend included): any output is a
    change; it says it hears every change once the kernel lists its netlink socket as subscribed. render:
    the rules file the agent replaces at each sync, by its mtime (a poll, so never "hears every change")."""
    nodes = state["nodes"]

    async def monitor(node: str, changed: Callable[[bool], None]) -> None:
        while True:
            proc = await asyncio.create_subprocess_exec(
                "ip", "netns", "exec", nodes[node]["netns"], "nft", "monitor",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            assert proc.stdout is not None
            try:
                # From the moment it is subscribed every commit is heard: what was read before is read again.
                # (Not told: it still says when something changes, but every path read reads the node.)
                listening = await _subscribed(proc)
                changed(listening)
                # Chunks, not lines: one rule of a big vmap can be longer than a StreamReader line.
                while await proc.stdout.read(1 << 16):
                    changed(listening)
            finally:
                if proc.returncode is None:
                    proc.kill()
                await asyncio.shield(proc.wait())
            log.warning("nft monitor in %s ended (%s); starting it again", nodes[node]["netns"], proc.returncode)
            changed(False)  # something may have changed while nobody listened; until it listens, always read
            await asyncio.sleep(MONITOR_RESTART_SECONDS)

    async def file(node: str, changed: Callable[[bool], None]) -> None:
        path = data_dir / "nodes" / node / "iptables.rules"
        last: int | None = None
        while True:
            with contextlib.suppress(FileNotFoundError):
                mtime = path.stat().st_mtime_ns
                if mtime != last:
                    if last is not None:
                        changed(False)
                    last = mtime
            await asyncio.sleep(RULES_FILE_POLL_SECONDS)

    return monitor if state.get("dataplane") == "netns" else file


async def serve(api: ApiClient, *, state: dict[str, Any], data_dir: Path, host: str, port: int,
                on_ready: Callable[[int], None] | None = None, explain_pod: PodExplainer | None = None) -> None:
    import uvicorn

    view = View(api, nodes=sorted(state["nodes"]), read_rules=rules_reader(state, data_dir),
                watch_rules=rules_watcher(state, data_dir), explain_pod=explain_pod)
    config = uvicorn.Config(EndQuietlyOnStop(build_app(view)), host=host, port=port, log_level="warning",
                            lifespan="off")
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
