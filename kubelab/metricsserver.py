"""A small HTTP listener for a component's Prometheus metrics: GET /metrics and /healthz.

kube-scheduler serves its metrics on :10259 and kube-controller-manager on :10257 (HTTPS there; plain
HTTP here, on loopback by default). Each component owns its own `CollectorRegistry`, so several
components in one process (`kubelab up`) never share a counter; each gets a listener of its own.
Plain asyncio streams: one request per connection, GET/HEAD only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .addressing import split_host_port

log = logging.getLogger(__name__)

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def split_bind_address(text: str) -> tuple[str, int]:
    """A --metrics-bind-address: "HOST:PORT", an empty host meaning every address; raises ValueError."""
    return split_host_port(text, default_host="0.0.0.0")


class MetricsServer:
    """Serves `registry` (or whatever `exposition()` returns) at /metrics; /healthz answers ok.
    A subclass answers other paths by overriding `respond` (proxyagent/metricserver.py)."""

    def __init__(self, host: str, port: int, *, registry: CollectorRegistry | None = None,
                 exposition: Callable[[], bytes] | None = None, name: str = "component",
                 sock: socket.socket | None = None) -> None:
        if exposition is None:
            if registry is None:
                raise ValueError("a registry or an exposition function is needed")
            exposition = lambda: generate_latest(registry)
        self.host, self.port, self.name = host, port, name
        self._exposition: Callable[[], bytes] = exposition
        self._server: asyncio.Server | None = None
        self._sock = sock  # already bound (by a parent process that recorded its address): served as it is

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    async def start(self) -> None:
        """Bind and listen; with port 0, `self.port` becomes the port the kernel picked."""
        if self._sock is not None:
            self._server = await asyncio.start_server(self._handle, sock=self._sock)
            self.host = self._sock.getsockname()[0]
        else:
            self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        # Under the component's own name in the log (kubelab/logs.py), not "kubelab".
        logging.getLogger(f"kubelab.component.{self.name}").info("metrics on %s", self.url)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        try:
            await self._server.serve_forever()
        finally:
            await self.close()

    def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        path = path.split("?", 1)[0]
        if path == "/metrics":
            body = self._exposition()
            return 200, CONTENT_TYPE_LATEST, body
        if path in ("/healthz", "/livez", "/readyz"):
            return 200, "text/plain; charset=utf-8", b"ok"
        return 404, "text/plain; charset=utf-8", b"404 page not found\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=10)
            parts = request.decode("latin-1").split()
            while (await asyncio.wait_for(reader.readline(), timeout=10)).strip():
                pass
            if len(parts) != 3:
                status, ctype, body = 400, "text/plain; charset=utf-8", b"bad request\n"
            else:
                status, ctype, body = self.respond(parts[0], parts[1])
            head = (f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + (b"" if parts[:1] == ["HEAD"] else body))
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def serve(server: MetricsServer | None) -> None:
    """Serve until cancelled; a port in use is logged and the component goes on without metrics
    (kube components too keep working when their metrics port is taken)."""
    if server is None:
        return
    try:
        await server.start()
    except OSError as exc:
        logging.getLogger(f"kubelab.component.{server.name}").warning("metrics not served on %s:%d: %s", server.host,
                                                                       server.port, exc)
        return
    await server.serve_forever()
