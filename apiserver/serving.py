"""How the API server is served: its listeners and connections, and what keeps one client's connections
from taking the server away from the others (its requests: flowcontrol.py).

kube-apiserver serves with Go's http.Server configured as (k8s.io/apiserver/pkg/server/secure_serving.go):
ReadHeaderTimeout 32 s, IdleTimeout 90 s, MaxHeaderBytes 1 MiB; its filter chain adds the request timeout
(`--request-timeout`, 1 min) for requests that are not long-running, and the in-flight limits
(`--max-requests-inflight` 400, `--max-mutating-requests-inflight` 200) answered with 429 and
`Retry-After: 1`. uvicorn has none of these: a connection that never finishes its headers, or never sends
one, stayed open for ever, and 20,000 of them used up the process's file descriptors. Here:

* `KubeHttpProtocol`, uvicorn's httptools protocol with Go's header timeout (from accept for a first
  request, from its first byte for a later one), idle timeout between requests and header size limit
  (431); `CappedServer`, which accepts connections only while fewer than a cap below the process's
  descriptor limit are open, so that the descriptors the process needs for itself (etcd, its own
  components' clients, iptables-restore) are never taken by clients: past the cap, new connections
  wait in the kernel's backlog.
* `ServingOptions` also carries the request side's settings, which flowcontrol.py's `RequestGuard` applies
  (kube's request timeout and in-flight limits); `Internal` marks the requests of `kubelab up`'s private
  socket for it.
* `uvicorn_config` builds the one uvicorn configuration every entry point uses (`kubelab apiserver`,
  `kubelab up`, the test harness), so what is tested is what runs.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import resource
import socket
import ssl
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.lifespan.on import LifespanOn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

# Set in the ASGI scope of requests that came through `kubelab up`'s private socket (its own components).
INTERNAL_KEY = "kubelab.internal"
# The connection of an Upgrade request, for the app to take over once authorized (nodeproxy.take_over).
UPGRADE_TRANSPORT_KEY = "kubelab.upgrade_transport"


@dataclass(frozen=True)
class ServingOptions:
    read_header_timeout: float = 32.0  # http.Server.ReadHeaderTimeout ("just shy of" the request timeout bound)
    idle_timeout: float = 90.0  # http.Server.IdleTimeout (matches http.DefaultTransport's keep-alive)
    max_header_bytes: int = 1 << 20  # http.Server.MaxHeaderBytes
    request_timeout: float = 60.0  # --request-timeout
    max_requests_inflight: int = 400  # --max-requests-inflight (0: no limit)
    max_mutating_requests_inflight: int = 200  # --max-mutating-requests-inflight (0: no limit)
    # Open client connections at most; None: the process's descriptor limit less a reserve for its own use.
    max_connections: int | None = None
    # LISTs of the most seats (flowcontrol.MAX_SEATS: about 1,000 objects or more) served at once; the others queue for
    # up to a quarter of the request timeout (APF's queue wait), then get 429.
    big_lists: int = 2


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one, as Go's runtime does at start (Go 1.19+), so the API
    server has the descriptors the system grants it. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(open_files: int) -> int:
    """Client connections allowed for a descriptor limit: a quarter is kept for the process's own use
    (at least 256, at most half), e.g. 15,000 of 20,000, 768 of 1,024."""
    reserve = min(max(256, open_files // 4), open_files // 2)
    return max(1, open_files - reserve)


class KubeHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with Go's http.Server limits (see the module docstring). Subclassed per
    server by `protocol_class`, which fixes `options` and the `on_lost` hook of the accepting server."""

    options = ServingOptions()

    def __init__(self, *args: Any, on_lost: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._on_lost = on_lost

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()  # the first request's headers are due from accept

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)
        if self._on_lost is not None:
            self._on_lost()
            self._on_lost = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        if self._header_timer is None:  # a later request on a kept-alive connection: due from its first byte
            self._arm_header_timer()

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        if self.parser.should_upgrade():
            # An Upgrade request (WebSocket, SPDY/3.1) is an ordinary request to the app, which may take the
            # connection over once it has authorized it: the upgrade-aware proxy of pods/exec and the like
            # (apiserver/nodeproxy.py). uvicorn's own WebSocket support is off (uvicorn_config).
            self.scope[UPGRADE_TRANSPORT_KEY] = self.transport  # type: ignore[literal-required]
        super().on_headers_complete()

    def _unsupported_upgrade_warning(self) -> None:
        """Upgrades are the app's (see on_headers_complete), not something to warn about."""

    def _count_header_bytes(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self.options.max_header_bytes and not self.transport.is_closing():
            # Go answers "431 Request Header Fields Too Large" and closes the connection.
            self._cancel_header_timer()
            body = b"431 Request Header Fields Too Large"
            self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                 b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
                                 b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.transport.close()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.options.read_header_timeout, self._header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        """Headers not complete in time: Go closes the connection without an answer."""
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol_class(options: ServingOptions) -> type[KubeHttpProtocol]:
    return type("KubeHttpProtocol", (KubeHttpProtocol,), {"options": options})


def uvicorn_config(app: ASGIApp, *, options: ServingOptions | None = None, ssl_certfile: str | None = None,
                   ssl_keyfile: str | None = None, lifespan: Literal["auto", "on", "off"] = "on",
                   graceful_shutdown: int | None = 2, **extra: Any) -> uvicorn.Config:
    """The uvicorn configuration of an API server listener. The client address is the connection's peer:
    uvicorn's proxy_headers would take it from X-Forwarded-For whenever the peer is loopback, so any local
    client could claim any address (kube-apiserver's RemoteAddr is the peer's; pods/proxy and services/proxy
    append it to X-Forwarded-For as Go's ReverseProxy does)."""
    options = options or ServingOptions()
    extra.setdefault("proxy_headers", False)
    return uvicorn.Config(app, http=protocol_class(options), ws="none", log_level="warning", access_log=False,
                          lifespan=lifespan, timeout_keep_alive=math.ceil(options.idle_timeout),
                          timeout_graceful_shutdown=graceful_shutdown, ssl_certfile=ssl_certfile,
                          ssl_keyfile=ssl_keyfile, **extra)


# The lifespan tasks whose start-up a SIGTERM or SIGINT cancelled (CappedServer.handle_exit).
_stopped_starting: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()


def is_stopped_during_startup() -> bool:
    """Whether the running task is an API server's start-up that a stop signal cancelled: the app's
    lifespan then ends its start-up quietly (nothing failed) instead of raising."""
    task = asyncio.current_task()
    return task is not None and task in _stopped_starting


class _StoppableLifespan(LifespanOn):
    """uvicorn's lifespan, knowing the task that runs the app's, so that a stop can cancel its start-up."""

    task: asyncio.Task[Any] | None = None

    async def main(self) -> None:
        self.task = asyncio.current_task()
        await super().main()


class CappedServer(uvicorn.Server):
    """uvicorn's Server with an accept loop of its own on its listening socket(s): it accepts only while
    fewer than the cap's connections are open, so a flood of connections waits in the kernel's backlog
    instead of taking descriptors the process needs (asyncio's own loop accepts up to a backlog's worth
    per wake-up, and closing the surplus came too late: `kubelab up` with 1,024 descriptors ran out
    under 1,500 idle connections). Go's netutil.LimitListener does the same; kube-apiserver, with a
    descriptor limit raised to the system's, does without. The TLS handshake is bounded by the header
    timeout, as Go bounds it by ReadHeaderTimeout."""

    def __init__(self, config: uvicorn.Config, options: ServingOptions) -> None:
        super().__init__(config)
        self.options = options
        self.cap = options.max_connections or connection_cap(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        self.open = 0
        self._room = asyncio.Event()
        self._listeners: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._connecting: set[asyncio.Task[None]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if type(self.lifespan) is LifespanOn:
            self.lifespan = _StoppableLifespan(self.config)
        await super().startup(sockets=[])  # the lifespan, and no listener of uvicorn's own
        if self.should_exit:  # stopped during the start-up: serve nothing, shut down at once
            return
        if sockets:
            self._listeners = list(sockets)
        else:
            self._listeners = [socket.create_server((self.config.host, self.config.port),
                                                    backlog=self.config.backlog)]
        for listener in self._listeners:
            listener.listen(self.config.backlog)  # a bound socket handed over may not listen yet
            listener.setblocking(False)
            self._accepting.append(asyncio.create_task(self._accept(listener), name="apiserver-accept"))

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """SIGTERM or SIGINT. uvicorn only marks the server to stop, which it looks at after the start-up:
        a start-up waiting for etcd (Registry.wait_for_storage, 30 s) or retrying its bootstrap (120 s)
        kept the process that long. kube-apiserver stops at once in its start-up; here the start-up is
        cancelled, and the app's lifespan (is_stopped_during_startup) ends it quietly."""
        super().handle_exit(sig, frame)
        lifespan = getattr(self, "lifespan", None)  # made by serve()
        if not isinstance(lifespan, _StoppableLifespan) or lifespan.startup_event.is_set():
            return
        task = lifespan.task
        if task is not None and not task.done():
            _stopped_starting.add(task)
            # A signal handler runs between two bytecodes of the loop: the cancel goes through its queue.
            task.get_loop().call_soon_threadsafe(task.cancel)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for task in self._accepting:
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        for listener in self._listeners:
            listener.close()
        await super().shutdown(sockets=sockets)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        delay = 0.005
        while True:
            while self.open >= self.cap:
                self._room.clear()
                await self._room.wait()
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                # Out of descriptors all the same (the process's own use grew): back off as Go's
                # accept loop does, 5 ms doubling to 1 s.
                log.warning("accept: %s; retrying in %.3fs", exc.strerror, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            delay = 0.005
            conn.setblocking(False)
            self.open += 1
            task = asyncio.create_task(self._connect(conn))
            self._connecting.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._connecting.discard)

    async def _connect(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        lost = False

        def on_lost() -> None:
            nonlocal lost
            if not lost:
                lost = True
                self.open -= 1
                self._room.set()

        def protocol() -> asyncio.Protocol:
            return self.config.http_protocol_class(  # type: ignore[call-arg]
                config=self.config, server_state=self.server_state, app_state=self.lifespan.state, on_lost=on_lost)

        try:
            if self.config.ssl is not None:
                await loop.connect_accepted_socket(protocol, conn, ssl=self.config.ssl,
                                                   ssl_handshake_timeout=self.options.read_header_timeout)
            else:
                await loop.connect_accepted_socket(protocol, conn)
        except (OSError, TimeoutError, ssl.SSLError):
            conn.close()
            on_lost()


def api_server(config: uvicorn.Config, options: ServingOptions | None = None) -> uvicorn.Server:
    """The server of an API server's port: its connections capped (CappedServer)."""
    return CappedServer(config, options or ServingOptions())


class Internal:
    """Marks requests of `kubelab up`'s private socket (its own components), for RequestGuard."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[INTERNAL_KEY] = True
        await self.app(scope, receive, send)


__all__ = ["INTERNAL_KEY", "CappedServer", "Internal", "KubeHttpProtocol", "ServingOptions", "api_server",
           "connection_cap", "is_stopped_during_startup", "raise_open_files_limit", "uvicorn_config"]
