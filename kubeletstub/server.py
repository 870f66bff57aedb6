"""The kubelet API: what kube-apiserver reaches on a node's `status.daemonEndpoints.kubeletEndpoint`
(port 10250 on its InternalIP) for `kubectl exec`, `logs`, `port-forward` (pkg/kubelet/server).

Routes, as kubelet's server.go names them:

* ``/exec/{namespace}/{pod}/{container}`` (and ``.../{uid}/{container}``), GET or POST, upgraded to a
  WebSocket with one of remotecommand's channel protocols (`execsession.py`);
* ``/attach/{namespace}/{pod}/{container}``: the same, joined to the container's own stdio (`attach.py`);
* ``/containerLogs/{namespace}/{pod}/{container}``: the container's CRI log files (`logs.py`);
* ``/portForward/{namespace}/{pod}`` (and ``.../{uid}``): WebSocket port-forwarding (`portforward.py`);
* ``/stats/summary``: the pods' CPU and memory (`stats.py`), which metrics.k8s.io is made of;
* ``/healthz``, ``/pods``.

One request per connection (every answer closes it): kube-apiserver dials a new connection per
streaming request anyway. With TLS, the server asks for a client certificate of the lab's CA, as
kubelet's --client-ca-file does, and refuses any connection without one (kube-apiserver presents
--kubelet-client-certificate).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelab.models import Pod
from kubelab.pki import KUBELET_CLIENT_NAME

from . import attach, containerexec, logs, portforward, spdystreams
from .containerexec import PodNamespaces
from .execsession import Channels, ExecOptions, ExecSession, WebSocketChannels, options_problem, refuse_exec
from .spdystreams import SpdyChannels
from .stats import StatsProvider
from .streaming import channels, httpwire
from .streaming.spdy import SpdyConnection
from .streaming.websocket import WebSocket, accept_key

log = logging.getLogger(__name__)
HEAD_TIMEOUT = 30.0


@dataclass
class KubeletApiConfig:
    """`pods` are the pods bound to this node by "namespace/name" (the kubelet's cache); `dataplane` runs
    things in them; `log_root` is where the container logs are (crilog.py's layout)."""

    node_name: str
    pods: Mapping[str, Pod]
    dataplane: PodNamespaces
    log_root: Path | None = None
    # A running container's stdio for attach (attach.py); None: attach.attach_target, the runtime's.
    attachable: attach.AttachLookup | None = None


def _containers(pod: Pod) -> list[str]:
    spec = pod.spec
    names = [c.name for c in (spec.init_containers or [])] if spec else []
    names += [c.name for c in (spec.containers or [])] if spec else []
    return [n for n in names if n]


def server_context(cert_file: str, key_file: str, client_ca_file: str) -> ssl.SSLContext:
    """HTTPS for the kubelet API: its serving certificate, and a client certificate of `client_ca_file`
    required of every connection (kubelet with --client-ca-file and anonymous auth off)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca_file)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(cert_file, key_file)
    return context


def client_name(writer: asyncio.StreamWriter) -> str | None:
    """The common name of the TLS client's certificate; None on a plain connection."""
    cert = writer.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


class KubeletServer:
    def __init__(self, config: KubeletApiConfig, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.config = config
        self.ssl_context = ssl_context
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self.address: tuple[str, int] | None = None
        self.stats = StatsProvider(config.node_name, config.dataplane)

    async def start(self, sock: socket.socket) -> None:
        """Serve on a bound socket (made in the node's network namespace by the caller)."""
        sock.listen(128)
        sock.setblocking(False)
        self.address = sock.getsockname()[:2]
        self._server = await asyncio.start_server(self._accept, sock=sock, ssl=self.ssl_context,
                                                  limit=httpwire.MAX_HEAD)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            # Only close() cancels a connection's task, and the task ends here: were the cancellation
            # re-raised, Python 3.11's start_server callback would log it as an error with a traceback
            # (it calls task.exception() on a cancelled task) on every Ctrl-C with a stream open.
            pass
        except Exception:  # one broken request must not take the node's API down
            log.exception("%s: kubelet API request failed", self.config.node_name)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(httpwire.read_request(reader), HEAD_TIMEOUT)
        except httpwire.BadRequest as exc:
            await httpwire.respond(writer, 400, str(exc))
            return
        if self.ssl_context is not None and client_name(writer) != KUBELET_CLIENT_NAME:
            # Only the API server may use the kubelet API (its webhook authorizer, for anyone else, asks
            # for nodes/proxy, which kubelab grants nobody but the API server's certificate).
            await httpwire.respond(writer, 403, f"Forbidden (user={client_name(writer)}, verb="
                                                f"{'get' if request.method == 'GET' else 'create'}, resource=nodes, "
                                                "subresource=proxy)")
            return
        parts = [p for p in request.path.split("/") if p]
        route = parts[0] if parts else ""
        if request.path in ("/healthz", "/healthz/"):
            await httpwire.respond(writer, 200, "ok")
        elif route == "exec" and len(parts) in (4, 5):
            await self._exec(request, reader, writer, parts[1], parts[2], parts[-1])
        elif route == "attach" and len(parts) in (4, 5):
            await self._attach(request, reader, writer, parts[1], parts[2], parts[-1])
        elif route == "containerLogs" and len(parts) == 4:
            await self._logs(request, writer, parts[1], parts[2], parts[3])
        elif route == "portForward" and len(parts) in (3, 4):
            await self._port_forward(request, reader, writer, parts[1], parts[2])
        elif request.path in ("/stats/summary", "/stats/summary/"):
            summary = await self.stats.summary(self.config.pods)
            await httpwire.respond(writer, 200, json.dumps(summary), content_type="application/json")
        elif request.path in ("/pods", "/pods/"):
            items = [p.model_dump(by_alias=True, exclude_none=True) for p in list(self.config.pods.values())]
            await httpwire.respond(writer, 200, json.dumps({"kind": "PodList", "apiVersion": "v1",
                                                            "metadata": {}, "items": items}),
                                   content_type="application/json")
        else:
            await httpwire.respond(writer, 404, "404 page not found")

    # --- WebSocket ------------------------------------------------------------------------------

    async def _upgrade(self, request: httpwire.Request, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, supported: tuple[str, ...]) -> WebSocket | None:
        """The WebSocket handshake with one of `supported`; None (answered) when it cannot be made."""
        if request.upgrade != "websocket" or "sec-websocket-key" not in request.headers:
            await httpwire.respond(writer, 400, "Upgrade request required")
            return None
        offered = [v for v in request.headers.get("sec-websocket-protocol", "").split(",") if v.strip()]
        protocol = channels.negotiate(offered, supported)
        if protocol is None:
            await httpwire.respond(writer, 400, f"unable to upgrade: unable to match client subprotocols "
                                                f"{offered} to server subprotocols {list(supported)}")
            return None
        headers = {"Upgrade": "websocket", "Connection": "Upgrade",
                   "Sec-WebSocket-Accept": accept_key(request.headers["sec-websocket-key"])}
        if offered:
            headers["Sec-WebSocket-Protocol"] = protocol
        writer.write(httpwire.response_head(101, headers))
        await writer.drain()
        return WebSocket(reader, writer, client=False, subprotocol=protocol)

    def _pod(self, namespace: str, name: str) -> Pod | None:
        pod = self.config.pods.get(f"{namespace}/{name}")
        if pod is None or (pod.spec and pod.spec.node_name not in (None, self.config.node_name)):
            return None
        return pod

    async def _stream_pod(self, request: httpwire.Request, writer: asyncio.StreamWriter, namespace: str, name: str,
                          container: str) -> Pod | None:
        """The pod an exec or attach is for, or None once kubelet's refusal has been answered."""
        if request.method not in ("GET", "POST"):
            await httpwire.respond(writer, 405, "405 method not allowed")
            return None
        pod = self._pod(namespace, name)
        if pod is None:
            await httpwire.respond(writer, 404, "pod does not exist")
            return None
        if container not in _containers(pod):
            await httpwire.respond(writer, 500, f'container not found ("{container}")')
            return None
        return pod

    # --- exec -----------------------------------------------------------------------------------

    async def _exec(self, request: httpwire.Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    namespace: str, name: str, container: str) -> None:
        pod = await self._stream_pod(request, writer, namespace, name, container)
        if pod is None:
            return
        command = request.query.get("command", [])
        tty = request.flag("tty")
        opts = ExecOptions(stdin=request.flag("input") or request.flag("stdin"),
                           stdout=request.flag("output") or request.flag("stdout"),
                           stderr=(request.flag("error") or request.flag("stderr")) and not tty, tty=tty)
        problem = options_problem(opts)
        if problem is None and not command:
            problem = "you must specify at least one command for the container"
        if problem is not None:
            await httpwire.respond(writer, 400, problem)
            return
        target = containerexec.exec_target(self.config.dataplane, pod, container, command)
        if target is None:
            await httpwire.respond(writer, 500, f'container not found ("{container}")')
            return
        streams = await self._exec_streams(request, reader, writer, opts)
        if streams is None:
            return
        refusal = containerexec.missing_binary(command, containerexec.container_path(pod, container))
        if refusal is not None:
            _code, detail = refusal
            await refuse_exec(streams, opts, command, message=containerexec.oci_message(detail))
            return
        await ExecSession(streams, target.argv, command, opts, env=target.env, cwd=target.cwd).run()

    async def _exec_streams(self, request: httpwire.Request, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter, opts: ExecOptions) -> Channels | None:
        """The upgraded connection's channels: a WebSocket, or SPDY/3.1 with the streams the options call
        for (kubelet's createStreams); None when the upgrade failed (answered)."""
        if request.upgrade != "spdy/3.1":
            ws = await self._upgrade(request, reader, writer, channels.EXEC_PROTOCOLS)
            return WebSocketChannels(ws, channels.Codec(ws.subprotocol)) if ws is not None else None
        protocol = await self._spdy_upgrade(request, writer, spdystreams.EXEC_PROTOCOLS)
        if protocol is None:
            return None
        conn = SpdyConnection(reader, writer)
        running = asyncio.create_task(conn.run(), name="spdy-exec")
        expected = {"error"} | {name for name, wanted in (("stdin", opts.stdin), ("stdout", opts.stdout),
                                                          ("stderr", opts.stderr), ("resize", opts.tty)) if wanted}
        if protocol == "channel.k8s.io":
            expected.discard("error")  # v1 may leave the error stream out
            expected.discard("resize")
        streams = await spdystreams.accept_streams(conn, expected)
        if streams is None:
            running.cancel()
            await conn.close()
            return None
        return SpdyChannels(conn, streams, protocol, running)

    async def _spdy_upgrade(self, request: httpwire.Request, writer: asyncio.StreamWriter,
                            supported: tuple[str, ...]) -> str | None:
        """httpstream's SPDY/3.1 upgrade with X-Stream-Protocol-Version negotiation; None when refused."""
        offered = request.headers.get("x-stream-protocol-version", "")
        protocol = spdystreams.negotiate(offered, supported) if offered else supported[-1]
        if protocol is None:
            await httpwire.respond(writer, 403, f"unable to upgrade: unable to negotiate protocol: client "
                                                f"supports {offered.split(', ')}, server supports {list(supported)}")
            return None
        writer.write(httpwire.response_head(101, {"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                                  "X-Stream-Protocol-Version": protocol}))
        await writer.drain()
        return protocol

    # --- attach ---------------------------------------------------------------------------------

    async def _attach(self, request: httpwire.Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      namespace: str, name: str, container: str) -> None:
        pod = await self._stream_pod(request, writer, namespace, name, container)
        if pod is None:
            return
        tty = request.flag("tty")
        opts = ExecOptions(stdin=request.flag("stdin"), stdout=request.flag("stdout"),
                           stderr=request.flag("stderr") and not tty, tty=tty)
        problem = options_problem(opts)
        if problem is not None:
            await httpwire.respond(writer, 400, problem)
            return
        lookup = self.config.attachable
        target = lookup(pod, container) if lookup else attach.attach_target(self.config.dataplane, pod, container)
        if target is None:
            await httpwire.respond(writer, 500, f"container {container} of pod {namespace}/{name} cannot be "
                                                "attached to: the runtime gives no access to its stdio")
            return
        streams = await self._exec_streams(request, reader, writer, opts)
        if streams is not None:
            await attach.AttachSession(streams, target, opts).run()

    # --- logs -----------------------------------------------------------------------------------

    async def _logs(self, request: httpwire.Request, writer: asyncio.StreamWriter, namespace: str, name: str,
                    container: str) -> None:
        pod = self._pod(namespace, name)
        if pod is None:
            await httpwire.respond(writer, 404, f'pod "{name}" not found')  # kubelet: NotFound for the pod
            return
        try:
            options = logs.LogOptions.from_query(request.query)
        except ValueError as exc:
            await httpwire.respond(writer, 400, str(exc))
            return
        problem = logs.container_problem(pod, container, previous=options.previous)
        if problem is not None or self.config.log_root is None:
            await httpwire.respond(writer, 400, problem or f'container "{container}" in pod "{name}" has no logs '
                                                           "on this node")
            return
        assert self.config.log_root is not None
        files = logs.log_files(self.config.log_root, pod, container, previous=options.previous)
        writer.write(httpwire.response_head(200, {"Content-Type": "text/plain", "Connection": "close",
                                                  "Transfer-Encoding": "identity"}))

        def still_running() -> bool:
            current = self._pod(namespace, name)
            return current is not None and current.metadata.uid == pod.metadata.uid and \
                logs.is_running(current, container)

        async for chunk in logs.stream(files, options, still_running=still_running):
            writer.write(chunk)
            await writer.drain()

    # --- port-forward ---------------------------------------------------------------------------

    async def _port_forward(self, request: httpwire.Request, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter, namespace: str, name: str) -> None:
        pod = self._pod(namespace, name)
        if pod is None:
            await httpwire.respond(writer, 404, "pod does not exist")
            return
        netns = self.config.dataplane.pod_netns(pod.key)
        if netns is None:
            await httpwire.respond(writer, 500, f"pod {name} has no network namespace on this node")
            return
        pod_name = f"{namespace}/{name}"
        if request.upgrade == "spdy/3.1":
            if await self._spdy_upgrade(request, writer, (spdystreams.PORTFORWARD_PROTOCOL,)) is not None:
                await spdystreams.serve_port_forward(SpdyConnection(reader, writer), netns, pod_name)
            return
        offered = request.headers.get("sec-websocket-protocol", "")
        if spdystreams.TUNNELED_PORTFORWARD in [p.strip() for p in offered.split(",")]:
            # kubectl 1.31+: SPDY inside the WebSocket, ports named on its streams.
            ws = await self._upgrade(request, reader, writer, (spdystreams.TUNNELED_PORTFORWARD,))
            if ws is not None:
                tunnel = spdystreams.WebSocketBytes(ws)
                await spdystreams.serve_port_forward(SpdyConnection(tunnel, tunnel), netns, pod_name)
            return
        try:
            ports = portforward.parse_ports(request.query.get("port", []))
        except ValueError as exc:
            await httpwire.respond(writer, 400, str(exc))
            return
        ws = await self._upgrade(request, reader, writer, channels.PORTFORWARD_PROTOCOLS)
        if ws is None:
            return
        await portforward.WebSocketPortForward(ws, channels.Codec(ws.subprotocol), netns, ports, pod=pod_name).run()
