"""The upgrade-aware reverse proxy of pods/proxy and services/proxy, as kube-apiserver's
UpgradeAwareHandler proxies them (k8s.io/apimachinery/pkg/util/proxy: upgradeaware.go, transport.go),
to the address proxylocation.py resolved.

What kube does, and so this:

* every method (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS); the query as it came; the path after
  `/proxy` joined onto the target's (Go's path.Join: `..` cleaned away, a trailing slash kept), and a
  GET or HEAD of `.../proxy` with nothing after it redirected (301) to `.../proxy/`;
* the client's headers, less the hop-by-hop ones and the credentials the API server consumed
  (Authorization and Impersonate-* were removed by authentication), plus X-Forwarded-For (the client)
  and X-Forwarded-Uri (the path the client asked for);
* the answer streamed back as it comes (status, headers, body), less hop-by-hop and CORS headers, with
  a Location on the pod's own host or a bare absolute path rewritten to go through the proxy again;
* an Upgrade request (WebSocket, SPDY) sent on with its Upgrade headers: a 101 splices the two
  connections (nodeproxy.splice), anything else is passed back as the answer;
* a backend that cannot be reached is 503 `error trying to reach service: dial tcp IP:PORT: connect:
  connection refused`, kube's words; never a hang (the dial is bounded).

The connection is made from the namespace the API server reaches pods from (Config.kubelet_netns: in
`kubelab up --dataplane netns` the API server's own namespace on the lab network, routed to every
node's pod CIDR), so the path to the pod is a real route; https targets are not verified, as kube's
proxy transport does not verify them.

Not done: kube rewrites links inside text/html answers (href, src, ...) to go through the proxy; here
only Location headers are rewritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from kubelab.validation import is_ascii_digits

from . import errors, nodeproxy
from .proxylocation import ProxyTarget

MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024
# Hop-by-hop headers (RFC 7230 6.1, Go's httputil.ReverseProxy): for one connection only, never passed on.
HOP_BY_HOP = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "te", "trailer", "transfer-encoding", "upgrade"})
# What the API server consumed (WithAuthentication deletes Authorization; impersonation its headers) or sets.
CONSUMED = frozenset({"authorization", "host", "content-length", "x-forwarded-uri"})
CORS_HEADERS = frozenset({"access-control-allow-credentials", "access-control-allow-headers",
                          "access-control-allow-methods", "access-control-allow-origin"})
BODYLESS_STATUS = frozenset({204, 304})
# kube's path escaping keeps these as they are in a path (Go's url.PathEscape set for encodePath).
PATH_SAFE = "/:@&=+$,;!*'()~"


def go_path_join(*elements: str) -> str:
    """Go's path.Join: the non-empty elements joined with '/' and Cleaned ("" when all are empty)."""
    joined = "/".join(e for e in elements if e)
    if not joined:
        return ""
    rooted = joined.startswith("/")
    cleaned = posixpath.normpath(joined)
    if rooted:
        cleaned = "/" + cleaned.lstrip("/")  # normpath keeps a leading "//", Go's Clean does not
    return cleaned


def join_preserving_trailing_slash(*elements: str) -> str:
    """utilnet.JoinPreservingTrailingSlash."""
    result = go_path_join(*elements)
    last = next((e for e in reversed(elements) if e), "")
    if last.endswith("/") and not result.endswith("/"):
        result += "/"
    return result


def backend_path(rest: Iterable[str], *, trailing_slash: bool) -> str:
    """The path the target is asked for: the request's segments after `proxy` (getRequestOptions' subpath,
    with a leading slash, and a trailing one when the request had one), joined onto the target's "" path."""
    sub = "/".join(rest)
    if sub and not sub.startswith("/"):
        sub = "/" + sub
    if trailing_slash and not sub.endswith("/"):
        sub += "/"
    return join_preserving_trailing_slash("", sub)


def rewrite_location(value: str, *, prefix: str, request_host: str, backend: str) -> str:
    """Transport.rewriteURL for a Location header: a URL on another host, or a relative one, is left as
    it is; an absolute path on the backend's host (or on the host the client asked) goes back through the
    proxy: `/login` from web:80 becomes `<prefix>/login`."""
    try:
        url = urllib.parse.urlsplit(value)
    except ValueError:
        return value
    different_host = url.netloc != "" and url.netloc not in (backend, request_host)
    if different_host or not url.path.startswith("/"):
        return value
    scheme, netloc = (url.scheme, url.netloc) if url.netloc == request_host else ("", "")
    path = url.path
    if not path.startswith(prefix):
        path = go_path_join(prefix, url.path)
        if url.path.endswith("/") and not path.endswith("/"):
            path += "/"
    return urllib.parse.urlunsplit((scheme, netloc, path, url.query, url.fragment))


def _unreachable(detail: str) -> errors.StatusError:
    """Transport.RoundTrip's error: 503, `error trying to reach service: <the dial's or read's error>`."""
    return errors.StatusError(503, "ServiceUnavailable", f"error trying to reach service: {detail}")


def _insecure_context() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # kube's proxy transport: InsecureSkipVerify
    return context


def _is_upgrade(headers: list[tuple[bytes, bytes]]) -> bool:
    """httpstream.IsUpgradeRequest: Connection names upgrade and there is an Upgrade header."""
    connection = b",".join(v for k, v in headers if k.lower() == b"connection").decode("latin-1").lower()
    return "upgrade" in [t.strip() for t in connection.split(",")] and any(k.lower() == b"upgrade" for k, _ in headers)


def _request_head(request: Request, target: ProxyTarget, path_and_query: str, *, upgrade: bool,
                  body_length: str | None) -> bytes:
    headers: list[tuple[bytes, bytes]] = request.scope["headers"]
    named = {t.strip().lower() for k, v in headers if k.lower() == b"connection"
             for t in v.decode("latin-1").split(",")}
    host = next((v.decode("latin-1") for k, v in headers if k.lower() == b"host"), target.netloc)
    lines = [f"{request.method} {path_and_query} HTTP/1.1", f"Host: {host}"]
    forwarded_for = []
    for raw_name, raw_value in headers:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        key = name.lower()
        if key == "x-forwarded-for":
            forwarded_for.append(value)
            continue
        if upgrade and key == "upgrade":  # an upgrade's headers go on (tryUpgrade sends the request as it came)
            lines.append(f"{name}: {value}")
            continue
        if key in CONSUMED or key in HOP_BY_HOP or key in named or key.startswith(nodeproxy.DROPPED_PREFIXES):
            continue
        lines.append(f"{name}: {value}")
    client = request.scope.get("client")
    if client:
        forwarded_for.append(str(client[0]))
    if forwarded_for:
        lines.append(f"X-Forwarded-For: {', '.join(forwarded_for)}")
    lines.append(f"X-Forwarded-Uri: {urllib.parse.quote(request.url.path, safe=PATH_SAFE)}")
    if upgrade:
        lines.append("Connection: Upgrade")
    else:
        lines.append("Connection: close")  # one request per connection: its end is the answer's end
        if body_length is not None:
            lines.append(f"Content-Length: {body_length}")
        elif request.method in ("POST", "PUT", "PATCH", "DELETE"):
            lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]], bytes]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        raise _unreachable("EOF") from None
    except asyncio.LimitOverrunError:
        raise _unreachable("net/http: server response headers exceeded 65536 bytes; aborted") from None
    except (ConnectionError, OSError) as exc:
        raise _unreachable(f"read: {nodeproxy.os_reason(exc)}") from None
    lines = raw[:-4].decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/") or not is_ascii_digits(status_line[1]) \
            or len(status_line[1]) != 3:
        raise _unreachable(f"net/http: malformed HTTP response {lines[0][:64]!r}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers.append((name.strip(), value.strip()))
    return int(status_line[1]), headers, raw


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """A chunked body, de-chunked (uvicorn frames it again for the client)."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size_text = size_line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return
        if size == 0:
            with contextlib.suppress(asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, dropped
                    pass
            return
        while size:
            data = await reader.read(min(size, CHUNK))
            if not data:
                return
            size -= len(data)
            yield data
        await reader.readexactly(2)


async def _body(reader: asyncio.StreamReader, headers: list[tuple[str, str]], *, empty: bool
                ) -> AsyncIterator[bytes]:
    if empty:
        return
    values = {k.lower(): v for k, v in headers}
    with contextlib.suppress(asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        if "chunked" in values.get("transfer-encoding", "").lower():
            async for data in _chunks(reader):
                yield data
            return
        length = values.get("content-length")
        remaining = int(length) if length is not None and is_ascii_digits(length) else None
        while remaining is None or remaining > 0:
            data = await reader.read(CHUNK if remaining is None else min(CHUNK, remaining))
            if not data:
                return
            if remaining is not None:
                remaining -= len(data)
            yield data


class ProxiedResponse(StreamingResponse):
    """The backend's answer: its status, its headers as they came (repeated ones kept), its body streamed."""

    def __init__(self, status: int, raw_headers: list[tuple[bytes, bytes]], body: AsyncIterator[bytes]) -> None:
        super().__init__(body, status_code=status)
        self.raw_headers = raw_headers


class _TakenOver(Response):
    """The connection is the proxy's now (an upgrade was spliced): nothing more is written on it."""

    def __init__(self) -> None:
        super().__init__(status_code=101)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        return None


def redirect_to_slash(request: Request) -> Response:
    """proxyRedirectsforRootPath: a GET or HEAD of `.../proxy` is sent to `.../proxy/`."""
    query = request.scope.get("query_string", b"").decode("latin-1")
    location = urllib.parse.quote(request.url.path, safe=PATH_SAFE) + "/" + (f"?{query}" if query else "")
    return Response(status_code=301, headers={"Location": location})


async def forward(request: Request, target: ProxyTarget, *, path: str, netns: str | None,
                  upgrade_transport: Any = None) -> Response:
    """Proxy the request to `target` at `path` (already joined as kube joins it); see the module docstring."""
    if path == "" and request.method in ("GET", "HEAD"):
        return redirect_to_slash(request)
    query = request.scope.get("query_string", b"").decode("latin-1")
    path_and_query = urllib.parse.quote(path or "/", safe=PATH_SAFE) + (f"?{query}" if query else "")
    upgrade = upgrade_transport is not None and _is_upgrade(request.scope["headers"])
    body_length = request.headers.get("content-length")
    try:
        reader, writer = await nodeproxy.connect(target.host, target.tcp_port, netns=netns, limit=MAX_HEAD,
                                                 ssl_context=_insecure_context() if target.scheme == "https" else None)
    except nodeproxy.DialFailure as exc:
        raise _unreachable(f"dial tcp {target.dial_netloc}: {exc}") from None
    try:
        writer.write(_request_head(request, target, path_and_query, upgrade=upgrade, body_length=body_length))
        if not upgrade:
            await _send_body(request, writer, chunked=body_length is None and
                             request.method in ("POST", "PUT", "PATCH", "DELETE"))
        await writer.drain()
        status, headers, raw = await _head_unless_client_gone(request, reader, watch_client=not upgrade)
    except (ConnectionError, OSError) as exc:
        writer.close()
        raise _unreachable(f"write: {nodeproxy.os_reason(exc)}") from None
    except ClientGone:
        writer.close()
        return _TakenOver()  # nobody to answer
    except BaseException:
        writer.close()
        raise
    if upgrade and status == 101:
        client = nodeproxy.take_over(upgrade_transport)
        await nodeproxy.splice(client, reader, writer, raw)
        return _TakenOver()
    prefix = request.url.path[:len(request.url.path) - len(path)] if path and request.url.path.endswith(path) \
        else request.url.path
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        key = name.lower()
        if key in HOP_BY_HOP or key in CORS_HEADERS:
            continue
        if key == "content-length" and any(k.lower() == "transfer-encoding" for k, _ in headers):
            continue
        if key == "location":
            value = rewrite_location(value, prefix=prefix.rstrip("/"), request_host=request.headers.get("host", ""),
                                     backend=target.netloc)
        out.append((key.encode("latin-1"), value.encode("latin-1")))
    empty = request.method == "HEAD" or status in BODYLESS_STATUS

    async def body() -> AsyncIterator[bytes]:
        try:
            async for data in _body(reader, headers, empty=empty):
                yield data
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    return ProxiedResponse(status, out, body())


async def _client_gone(request: Request) -> None:
    """Returns when the client has gone (its body was read already: the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _head_unless_client_gone(request: Request, reader: asyncio.StreamReader, *, watch_client: bool
                                   ) -> tuple[int, list[tuple[str, str]], bytes]:
    """The backend's answer head (interim 1xx answers skipped); a client that goes away before it comes
    ends the wait (nothing is left waiting on a pod that never answers: the connection is closed)."""
    async def head() -> tuple[int, list[tuple[str, str]], bytes]:
        answer = await _read_head(reader)
        while 100 <= answer[0] < 200 and answer[0] != 101:  # 100 Continue and the like: the real one follows
            answer = await _read_head(reader)
        return answer

    if not watch_client:
        return await head()
    waiting = asyncio.create_task(head())
    gone = asyncio.create_task(_client_gone(request))
    try:
        await asyncio.wait((waiting, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not waiting.done():
            waiting.cancel()
        await asyncio.gather(waiting, gone, return_exceptions=True)
    if waiting.cancelled():
        raise ClientGone
    return waiting.result()


class ClientGone(Exception):
    """The client went away before the backend answered."""


async def _send_body(request: Request, writer: asyncio.StreamWriter, *, chunked: bool) -> None:
    """The client's body, as it arrives (chunk-framed when the client gave no length)."""
    async for data in request.stream():
        if not data:
            continue
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data)
        await writer.drain()
    if chunked:
        writer.write(b"0\r\n\r\n")


__all__ = ["ProxiedResponse", "backend_path", "forward", "go_path_join", "join_preserving_trailing_slash",
           "rewrite_location"]
