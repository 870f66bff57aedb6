"""The pod subresources that reach a kubelet — pods/log, pods/exec, pods/attach, pods/portforward — and
nodes/proxy, as kube-apiserver serves them (pkg/registry/core/pod/rest/subresources.go, log.go,
pkg/registry/core/pod/strategy.go's *Location, pkg/registry/core/node/rest/proxy.go); and pods/proxy and
services/proxy, which reach the pod itself (`connect_pod_proxy`, `connect_service_proxy`: the location
is proxylocation.py's, the proxying reverseproxy.py's).

Each finds the pod's kubelet (nodeproxy.kubelet_location) with kube's checks and words first: a pod
that is not there is 404, a container it does not have or an ambiguous one is 400, a pod with no node
is 400 ("does not have a host assigned"). Then log streams the kubelet's answer, and exec, attach and
port-forward, which must be upgrade requests, are spliced onto the kubelet's upgraded connection
(nodeproxy.py): the streaming protocol is the kubelet's alone.

The container is defaulted as kube-apiserver defaults it: the only container of a pod with one.
`kubectl.kubernetes.io/default-container` is kubectl's own (it sends the container it picked).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from starlette.responses import Response, StreamingResponse

from kubelab import kinds
from kubelab.validation import FieldError

from .. import errors, nodeproxy, proxylocation, reverseproxy
from ..serving import UPGRADE_TRANSPORT_KEY

POD_STREAMS = {"exec": "exec", "attach": "attach", "portforward": "portForward"}
POD_SUBRESOURCES = frozenset({"log", *POD_STREAMS})
LOG_PARAMS = ("follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes")
EXEC_PARAMS = ("stdin", "stdout", "stderr", "tty", "command")


def _names(containers: list[Any]) -> list[str]:
    return [str(c.get("name")) for c in containers if isinstance(c, dict) and c.get("name")]


def pick_container(pod: dict[str, Any], container: str) -> str:
    """streamLocation's choice of container, with kube's 400s."""
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name", "")
    containers = _names(spec.get("containers") or [])
    inits = _names(spec.get("initContainers") or [])
    ephemeral = _names(spec.get("ephemeralContainers") or [])
    if not container:
        if len(containers) == 1:
            return containers[0]
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        if inits:
            message += f" or one of the init containers: [{' '.join(inits)}]"
        raise errors.bad_request(message)
    if container not in containers + inits + ephemeral:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


def _first(request: Request, name: str) -> str:
    values = request.query_params.getlist(name)
    return values[0] if values else ""


def _integer(request: Request, name: str) -> int | None:
    text = _first(request, name)
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def log_options_problems(request: Request) -> list[FieldError]:
    """ValidatePodLogOptions."""
    problems: list[FieldError] = []
    tail, limit, since = _integer(request, "tailLines"), _integer(request, "limitBytes"), _integer(request,
                                                                                                   "sinceSeconds")
    if tail is not None and tail < 0:
        problems.append(FieldError("Invalid", "tailLines", tail, "must be greater than or equal to 0"))
    if limit is not None and limit < 1:
        problems.append(FieldError("Invalid", "limitBytes", limit, "must be greater than 0"))
    if since is not None and _first(request, "sinceTime"):
        problems.append(FieldError("Forbidden", "", None, "at most one of `sinceTime` or `sinceSeconds` may be "
                                                          "specified"))
    elif since is not None and since < 1:
        problems.append(FieldError("Invalid", "sinceSeconds", since, "must be greater than 0"))
    return problems


def _log_invalid(name: str, problems: list[FieldError]) -> errors.StatusError:
    text = str(problems[0]) if len(problems) == 1 else "[" + ", ".join(str(p) for p in problems) + "]"
    return errors.StatusError(422, "Invalid", f'PodLogOptions "{name}" is invalid: {text}',
                              {"name": name, "kind": "PodLogOptions",
                               "causes": [{"reason": p.reason, "message": p.body, "field": p.field}
                                          for p in problems]})


async def _location(request: Request, pod: dict[str, Any]) -> nodeproxy.KubeletLocation | None:
    """The pod's kubelet; None for a pod on no node."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return None
    node = await request.app.state.registry.get(kinds.NODES, None, node_name)
    return nodeproxy.kubelet_location(node, address=request.app.state.config.kubelet_address)


def _tls(request: Request) -> ssl.SSLContext | None:
    """The TLS context for kubelets (made once), None when the API server has no kubelet client certificate."""
    state = request.app.state
    context: ssl.SSLContext | None = getattr(state, "kubelet_tls", None)
    config = state.config
    if context is None and config.kubelet_client_certificate and config.kubelet_client_key:
        context = state.kubelet_tls = nodeproxy.client_context(config.kubelet_client_certificate,
                                                              config.kubelet_client_key,
                                                              config.kubelet_certificate_authority)
    return context


async def dial(request: Request, location: nodeproxy.KubeletLocation
               ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a kubelet, as this API server is configured to make it (namespace, TLS)."""
    return await nodeproxy.dial(location, netns=request.app.state.config.kubelet_netns, ssl_context=_tls(request))


async def connect_pod(request: Request, namespace: str, name: str, subresource: str) -> Response:
    pod = await request.app.state.registry.get(kinds.PODS, namespace, name)
    container = pick_container(pod, _first(request, "container")) if subresource != "portforward" else ""
    if subresource == "log":
        return await _log(request, pod, container)
    if subresource == "exec" and not request.query_params.getlist("command"):
        raise errors.bad_request("you must specify at least one command for the container")
    location = await _location(request, pod)
    if location is None:
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    transport = request.scope.get(UPGRADE_TRANSPORT_KEY)
    if transport is None:
        raise errors.bad_request("Upgrade request required")
    query = [(k, v) for k, v in request.query_params.multi_items() if k not in ("container", "ports")]
    ports = request.query_params.getlist("ports")
    if subresource == "portforward" and ports:
        # streamParams: PodPortForwardOptions.ports reach the kubelet as one `port`, comma-joined.
        query.append(("port", ",".join(ports)))
    path = f"/{POD_STREAMS[subresource]}/{namespace}/{name}" + (f"/{container}" if container else "")
    if query:
        path += "?" + urllib.parse.urlencode(query)
    return await _upgrade(request, location, path, transport)


async def _upgrade(request: Request, location: nodeproxy.KubeletLocation, path: str, transport: Any) -> Response:
    reader, writer = await dial(request, location)
    try:
        writer.write(nodeproxy.request_head(request.method, path, location, request.scope["headers"]))
        await writer.drain()
        head = await nodeproxy.read_response_head(reader, location)
    except BaseException:
        writer.close()
        raise
    if head.status != 101:
        # The kubelet's refusal, as a Status with its code and words: what kube-apiserver's stream translator
        # answers a WebSocket client with (kubectl prints it; client-go reads no plain-text body there).
        text = (await nodeproxy.read_body(reader, head)).decode("utf-8", "replace").strip()
        writer.close()
        raise errors.StatusError(head.status, _REASONS.get(head.status, "InternalError"),
                                 text or f"the kubelet refused the upgrade ({head.status})")
    client = nodeproxy.take_over(transport)
    await nodeproxy.splice(client, reader, writer, head.raw)
    return _TakenOver()


class _TakenOver(Response):
    """The connection is the proxy's now: nothing more is written on it."""

    def __init__(self) -> None:
        super().__init__(status_code=101)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        return None


async def _log(request: Request, pod: dict[str, Any], container: str) -> Response:
    name = (pod.get("metadata") or {}).get("name", "")
    problems = log_options_problems(request)
    if problems:
        raise _log_invalid(name, problems)
    location = await _location(request, pod)
    if location is None:
        return Response(b"", media_type="text/plain")  # LogLocation: no node yet, no logs yet
    query = [(k, v) for k, v in request.query_params.multi_items() if k in LOG_PARAMS]
    meta = pod.get("metadata") or {}
    path = f"/containerLogs/{meta.get('namespace')}/{name}/{container}"
    if query:
        path += "?" + urllib.parse.urlencode(query)
    reader, writer = await dial(request, location)
    try:
        writer.write(nodeproxy.request_head("GET", path, location, []))
        await writer.drain()
        head = await nodeproxy.read_response_head(reader, location)
        if head.status != 200:
            # GenericHttpResponseChecker: the kubelet's words, with its code.
            text = (await nodeproxy.read_body(reader, head)).decode("utf-8", "replace").strip()
            raise errors.StatusError(head.status, _REASONS.get(head.status, "InternalError"), text or
                                     f"the server has received an error from the kubelet ({head.status})")
    except BaseException:
        writer.close()
        raise

    async def body() -> AsyncIterator[bytes]:
        try:
            while chunk := await reader.read(nodeproxy.SPLICE_CHUNK):
                yield chunk
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    return StreamingResponse(body(), media_type="text/plain")


async def connect_node(request: Request, name: str, rest: tuple[str, ...]) -> Response:
    """nodes/NAME/proxy/PATH: the request, as it came, to the node's kubelet at /PATH (kubectl get --raw
    /api/v1/nodes/node-1/proxy/stats/summary); the kubelet's answer streamed back as it is."""
    node = await request.app.state.registry.get(kinds.NODES, None, name)
    location = nodeproxy.kubelet_location(node, address=request.app.state.config.kubelet_address)
    path = "/" + "/".join(urllib.parse.quote(part, safe="") for part in rest)
    if request.url.query:
        path += "?" + request.url.query
    body = await request.body() if request.method in ("POST", "PUT", "PATCH") else b""
    headers = [(k, v) for k, v in request.scope["headers"] if k.lower() in (b"accept", b"content-type")]
    reader, writer = await dial(request, location)
    try:
        head_bytes = nodeproxy.request_head(request.method, path, location, headers)
        writer.write(head_bytes[:-2] + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        head = await nodeproxy.read_response_head(reader, location)
    except BaseException:
        writer.close()
        raise

    async def stream() -> AsyncIterator[bytes]:
        try:
            while chunk := await reader.read(nodeproxy.SPLICE_CHUNK):
                yield chunk
        finally:
            writer.close()

    return StreamingResponse(stream(), status_code=head.status,
                             media_type=head.headers.get("content-type", "text/plain; charset=utf-8"))


# --- pods/proxy and services/proxy ------------------------------------------------------------------

def _proxy_path(request: Request, rest: tuple[str, ...]) -> str:
    return reverseproxy.backend_path(rest, trailing_slash=request.url.path.endswith("/"))


async def connect_pod_proxy(request: Request, namespace: str, pod_id: str, rest: tuple[str, ...]) -> Response:
    """pods/[scheme:]NAME[:PORT]/proxy/PATH: the request to the pod's IP (ProxyREST.Connect)."""
    scheme, name, port = proxylocation.parse_id("pod", pod_id)
    pod = await request.app.state.registry.get(kinds.PODS, namespace, name)
    target = proxylocation.pod_location(pod, scheme=scheme, port=port)
    return await reverseproxy.forward(request, target, path=_proxy_path(request, rest),
                                      netns=request.app.state.config.kubelet_netns,
                                      upgrade_transport=request.scope.get(UPGRADE_TRANSPORT_KEY))


async def connect_service_proxy(request: Request, namespace: str, service_id: str, rest: tuple[str, ...]
                                ) -> Response:
    """services/[scheme:]NAME[:PORT]/proxy/PATH: the request to one ready endpoint of the service, found
    as the service's ResourceLocation finds it: a port number is looked up in the Service (which is read
    only then, as kube reads it), then the Endpoints are read and an address whose pod still has its IP
    is picked."""
    registry = request.app.state.registry
    scheme, name, port = proxylocation.parse_id("service", service_id)
    number = proxylocation.numeric_port(port)
    if number is not None:
        service = await registry.get(kinds.SERVICES, namespace, name)
        port = proxylocation.service_port_name(service, name, number)
    endpoints = await registry.get(kinds.ENDPOINTS, namespace, name)
    for address, endpoint_port in proxylocation.service_candidates(endpoints, name=name, port_name=port):
        pod_name = proxylocation.address_pod(address, namespace)
        if pod_name is None:
            continue
        try:
            pod = await registry.get(kinds.PODS, namespace, pod_name)
        except errors.StatusError:
            continue  # isValidAddress: a pod that cannot be read is skipped
        if address.get("ip") not in proxylocation.all_pod_ips(pod):
            continue
        target = proxylocation.ProxyTarget(scheme, str(address["ip"]), str(endpoint_port))
        return await reverseproxy.forward(request, target, path=_proxy_path(request, rest),
                                          netns=request.app.state.config.kubelet_netns,
                                          upgrade_transport=request.scope.get(UPGRADE_TRANSPORT_KEY))
    raise proxylocation.no_endpoints(service_id)


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 500: "InternalError",
            503: "ServiceUnavailable"}
