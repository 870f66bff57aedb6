"""The API server's way to a kubelet, as kube-apiserver goes (pkg/kubelet/client, the upgrade-aware proxy
of k8s.io/apimachinery/pkg/util/proxy): where a node's kubelet listens, a connection to it, and the
splice of an upgraded client connection onto it.

Where: the Node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port` (kube's default
--kubelet-preferred-address-types puts InternalIP before anything kubelab sets). A port of 0 means the
node serves no kubelet API (the render dataplane: nothing runs there) and nothing is dialed.

How: a TCP connection, from the network namespace the API server was given (`kubelab up --dataplane
netns` puts it on the lab network as 10.240.0.4, routed like any other host there; None: the process's
own), so the way to a kubelet is a real route, not a shortcut into the node's namespace.

The upgrade (exec, attach, port-forward): the client's request goes to the kubelet with the same
Upgrade headers; when the kubelet answers 101 the answer goes back to the client byte for byte and the
two connections are spliced, so WebSocket and SPDY alike are the kubelet's to speak, as in kube. A
kubelet that answers anything else has its answer passed back to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.netnsthread import run_in_netns
from kubelab.validation import is_ascii_digits

from . import errors

DIAL_TIMEOUT = 10.0
MAX_RESPONSE_HEAD = 64 * 1024
MAX_ERROR_BODY = 64 * 1024
SPLICE_CHUNK = 64 * 1024
# Headers the API server does not pass on: the client's credentials are for the API server only
# (kube-apiserver authenticates to the kubelet with its own client certificate).
DROPPED_HEADERS = frozenset({"authorization", "host", "content-length", "transfer-encoding"})
DROPPED_PREFIXES = ("impersonate-",)


@dataclass(frozen=True, slots=True)
class KubeletLocation:
    node: str
    host: str
    port: int
    scheme: str = "http"

    @property
    def netloc(self) -> str:
        return f"{self.host}:{self.port}"


def kubelet_location(node: Mapping[str, Any], *, scheme: str = "http", address: str | None = None
                     ) -> KubeletLocation:
    """GetConnectionInfo: the node's InternalIP (else its first address; `address` when given) and kubelet
    port."""
    name = str((node.get("metadata") or {}).get("name") or "")
    status = node.get("status") or {}
    addresses = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    host = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None) or \
        next((a.get("address") for a in addresses if a.get("address")), None)
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 0
    host = address or host
    if not host:
        raise errors.bad_request(f'node "{name}" has no address to reach its kubelet at')
    if not isinstance(port, int) or not 0 < port < 65536:
        raise errors.StatusError(503, "ServiceUnavailable",
                                 f'node "{name}" serves no kubelet API (status.daemonEndpoints.kubeletEndpoint.Port '
                                 f"is {port})")
    return KubeletLocation(name, str(host), port, scheme)


def client_context(cert_file: str, key_file: str, ca_file: str | None) -> ssl.SSLContext:
    """TLS towards kubelets: the API server's client certificate, and the kubelets' serving certificates
    checked against `ca_file` (kube-apiserver without --kubelet-certificate-authority checks nothing)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    if ca_file is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(cert_file, key_file)
    return context


def dial_error(location: KubeletLocation, detail: str) -> errors.StatusError:
    """What kube-apiserver answers when it cannot reach the kubelet: the proxy's responder writes the
    plain error, which ErrorToAPIStatus makes a 500 with no reason (`Error from server: error dialing
    backend: ...` in kubectl)."""
    return errors.StatusError(500, "", f"error dialing backend: dial tcp {location.netloc}: {detail}")


def os_reason(exc: OSError) -> str:
    """Go's wording of a socket error: the errno's text in lower case ("connection refused")."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


class DialFailure(Exception):
    """A TCP (and TLS) connection that could not be made; its text is Go's tail of the dial error
    ("connect: connection refused", "i/o timeout")."""


async def connect(host: str, port: int, *, netns: str | None, ssl_context: ssl.SSLContext | None = None,
                  timeout: float = DIAL_TIMEOUT, limit: int = MAX_RESPONSE_HEAD
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to host:port made from `netns` (None: this process's own), bounded by `timeout`;
    DialFailure otherwise. The socket is made inside the namespace and used from this loop: the route
    is the namespace's, the I/O is ours."""
    def make() -> socket.socket:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.socket(family, socket.SOCK_STREAM)

    try:
        sock = run_in_netns(netns, make, name="kubelet-dial") if netns else make()
    except OSError as exc:
        raise DialFailure(f"socket: {os_reason(exc)}") from None
    try:
        sock.setblocking(False)
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (host, port)), timeout)
        return await asyncio.open_connection(sock=sock, ssl=ssl_context, server_hostname=host if ssl_context else None,
                                             limit=limit)
    except TimeoutError:
        sock.close()
        raise DialFailure("i/o timeout") from None
    except (OSError, ssl.SSLError) as exc:
        sock.close()
        reason = os_reason(exc) if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError) else str(exc)
        raise DialFailure(f"connect: {reason}") from None


async def dial(location: KubeletLocation, *, netns: str | None, ssl_context: ssl.SSLContext | None = None,
               timeout: float = DIAL_TIMEOUT) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the kubelet, made from `netns`; kube's dial error otherwise (never a hang: the
    dial is bounded by `timeout`)."""
    try:
        return await connect(location.host, location.port, netns=netns, ssl_context=ssl_context, timeout=timeout)
    except DialFailure as exc:
        raise dial_error(location, str(exc)) from None


def request_head(method: str, path_and_query: str, location: KubeletLocation,
                 headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    lines = [f"{method} {path_and_query} HTTP/1.1", f"Host: {location.netloc}"]
    for name, value in headers:
        key = name.decode("latin-1").lower()
        if key in DROPPED_HEADERS or key.startswith(DROPPED_PREFIXES):
            continue
        lines.append(f"{name.decode('latin-1')}: {value.decode('latin-1')}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    headers: dict[str, str]
    raw: bytes


async def read_response_head(reader: asyncio.StreamReader, location: KubeletLocation) -> ResponseHead:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError) as exc:
        raise errors.internal(f"error reading the kubelet's answer from {location.netloc}: {exc}") from None
    lines = raw[:-4].decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise errors.internal(f"malformed answer from the kubelet at {location.netloc}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return ResponseHead(status, headers, raw)


async def read_body(reader: asyncio.StreamReader, head: ResponseHead, limit: int = MAX_ERROR_BODY) -> bytes:
    """A (short) response body: Content-Length, or up to the end of the connection; at most `limit`."""
    size = head.headers.get("content-length")
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        if size is not None and is_ascii_digits(size):
            return await reader.readexactly(min(int(size), limit))
        return await reader.read(limit)
    return b""


class _Spliced(asyncio.Protocol):
    """What an upgraded client connection's bytes go to once taken from uvicorn: a StreamReader (which
    pauses the transport when its buffer is full) and write flow control; its end is passed on to the
    HTTP protocol it replaced, which does its own bookkeeping (the connection cap)."""

    def __init__(self, transport: asyncio.Transport, previous: asyncio.BaseProtocol) -> None:
        self.transport = transport
        self.previous = previous
        self.reader = asyncio.StreamReader(limit=SPLICE_CHUNK)
        self.reader.set_transport(transport)
        self._writable = asyncio.Event()
        self._writable.set()
        self.lost = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.reader.feed_data(data)

    def eof_received(self) -> bool:
        self.reader.feed_eof()
        # Keep the write side open, the kubelet may still be talking (TLS has no half close to keep).
        return self.transport.get_extra_info("sslcontext") is None

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reader.feed_eof()
        self._writable.set()
        self.lost.set()
        self.previous.connection_lost(exc)

    async def write(self, data: bytes) -> None:
        if self.transport.is_closing():
            raise ConnectionResetError("client gone")
        self.transport.write(data)
        await self._writable.wait()


def take_over(transport: asyncio.Transport) -> _Spliced:
    """The client connection's bytes from now on come here, not to uvicorn's HTTP parser."""
    spliced = _Spliced(transport, transport.get_protocol())
    transport.set_protocol(spliced)
    return spliced


async def splice(client: _Spliced, backend_reader: asyncio.StreamReader, backend_writer: asyncio.StreamWriter,
                 first: bytes) -> None:
    """Copy both ways until either side ends, then close both. `first` (the kubelet's 101) goes first."""
    async def to_client() -> None:
        await client.write(first)
        while data := await backend_reader.read(SPLICE_CHUNK):
            await client.write(data)

    async def to_backend() -> None:
        while data := await client.reader.read(SPLICE_CHUNK):
            backend_writer.write(data)
            await backend_writer.drain()

    tasks = [asyncio.create_task(to_client(), name="splice-to-client"),
             asyncio.create_task(to_backend(), name="splice-to-kubelet")]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if tasks[1] in done and not tasks[0].done() and backend_writer.can_write_eof():
            # The client finished sending: the kubelet hears the end of file and still has its say (it
            # closes when its side is done, which ends the copy to the client). Over TLS there is no half
            # close: the kubelet hears the whole connection end, and cleans up as for a client gone.
            with contextlib.suppress(OSError, RuntimeError):
                backend_writer.write_eof()
            await asyncio.wait([tasks[0]])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        backend_writer.close()
        client.transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(client.lost.wait(), 5)
