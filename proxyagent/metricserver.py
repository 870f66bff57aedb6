"""A tiny HTTP server for a proxy agent: /metrics, /healthz, /livez and /proxyMode.

kube-proxy serves its metrics on --metrics-bind-address (127.0.0.1:10249) and its health on
--healthz-bind-address (0.0.0.0:10256); here one listener answers both kinds of question, which is
all a lab needs. /healthz answers like kube-proxy's ProxierHealthServer: 200 while no requested
sync has been waiting longer than twice the sync period, 503 otherwise, with the JSON body
`{"lastUpdated": ..., "currentTime": ..., "nodeEligible": true}`.

Plain asyncio streams: one request per connection, GET/HEAD only, nothing but these paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from .metrics import CONTENT_TYPE

log = logging.getLogger(__name__)

DEFAULT_BIND_ADDRESS = "127.0.0.1:10249"  # kube-proxy's --metrics-bind-address default
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable",
            400: "Bad Request"}


def split_bind_address(text: str) -> tuple[str, int]:
    """"HOST:PORT" (or "[v6]:PORT") -> (host, port); raises ValueError."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _timestamp(seconds: float | None) -> str:
    return "" if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class MetricsServer:
    """Serves one agent. `metrics()` gives the exposition bytes, `healthy()` the health verdict,
    `last_updated()` when its last sync succeeded (epoch seconds, or None)."""

    def __init__(self, host: str, port: int, *, metrics: Callable[[], bytes], healthy: Callable[[], bool],
                 last_updated: Callable[[], float | None] = lambda: None, proxy_mode: str = "iptables") -> None:
        self.host = host
        self.port = port
        self._metrics = metrics
        self._healthy = healthy
        self._last_updated = last_updated
        self._proxy_mode = proxy_mode
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Bind and listen; with port 0, `self.port` is the port the kernel picked."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

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
        """(status, content type, body) for a request. Pure apart from asking the agent."""
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        path = path.split("?", 1)[0]
        if path == "/metrics":
            return 200, CONTENT_TYPE, self._metrics()
        if path in ("/healthz", "/livez"):
            healthy = self._healthy()
            body = json.dumps({"lastUpdated": _timestamp(self._last_updated()),
                               "currentTime": _timestamp(datetime.now(UTC).timestamp()), "nodeEligible": True})
            return (200 if healthy else 503), "application/json", body.encode()
        if path == "/proxyMode":
            return 200, "text/plain; charset=utf-8", self._proxy_mode.encode()
        return 404, "text/plain; charset=utf-8", b"404 page not found\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=10)
            parts = request.decode("latin-1").split()
            while (await asyncio.wait_for(reader.readline(), timeout=10)).strip():
                pass  # headers: nothing here depends on them
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
