"""ApiClient: typed get/list/create/update/patch/delete/watch against kubelab's (or any) API server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import httpx
import orjson
import pydantic

from .. import kinds, models
from ..kinds import ResourceType
from ..validation import is_ascii_digits
from .asgi import App, AsgiTransport
from .errors import ApiError

log = logging.getLogger(__name__)

T = TypeVar("T", bound=models.TypedObject)

# on_undecodable(event type or None for a listed item, raw object, error): told of an object that does
# not fit its model (a value of the wrong type, written straight into etcd); without one, it raises.
Undecodable = Callable[[str | None, dict[str, Any], pydantic.ValidationError], None]


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: models.TypedObject

    @property
    def resource_version(self) -> str:
        return self.object.metadata.resource_version or ""


class NotSent(httpx.ConnectError):
    """aiohttp could not connect: the request never left (fast_requests)."""


def _not_sent(exc: httpx.TransportError, *, fast: bool) -> bool:
    """Whether a failed request certainly never reached the server, so another may be asked at once:
    no connection was made (httpx's ConnectError/ConnectTimeout; aiohttp's connector error)."""
    if fast:
        return isinstance(exc, NotSent)
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# client-go's maxRetries for requests answered 429 with Retry-After.
MAX_RETRIES = 10


def _retry_after_seconds(header: str | None) -> int | None:
    """Retry-After in whole seconds, as client-go reads it (1 to 30 s here; None when absent or not a number)."""
    if header is None or not is_ascii_digits(header):
        return None
    return min(max(int(header), 1), 30)


def _params(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None and v != ""}


class ApiClient:
    """An asyncio client for one API server. Objects go in and come out as kubelab models.

    `fast_requests=True` sends the plain request/response verbs and the watch streams through aiohttp
    instead of httpx: measured against kubelab's API server, an httpx request costs the client
    0.9 ms of CPU at 4 requests in flight and 1.7 ms at 16, aiohttp 0.15 ms, and the server parses the
    one-packet aiohttp request faster too (bench/scheduler.py, BENCHMARKS.md). The scheduler, which
    writes a binding and an event per pod and reads two watch events, uses it. Connection failures
    still raise httpx errors.
    """

    def __init__(self, server: str | Sequence[str], *, token: str | None = None, user_agent: str = "kubelab",
                 timeout: float = 30.0, fast_requests: bool = False, ca_file: str | None = None,
                 uds: str | None = None, app: App | None = None,
                 write_fence: Callable[[], None] | None = None) -> None:
        headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        # Several API servers (a list, or one string of comma-separated URLs, as --server takes them): requests
        # go to one at a time; when it cannot be reached the client moves to the next (`_fail_over`).
        self.servers = [s.strip().rstrip("/") for s in ([server] if isinstance(server, str) else server)
                        for s in s.split(",") if s.strip()]
        if not self.servers:
            raise ValueError("no API server URL given")
        self.server = self.servers[0]
        # An https server's certificate is checked against `ca_file` (kubectl's --certificate-authority)
        # when given, else against the system's trust store.
        self._ssl: ssl.SSLContext | None = ssl.create_default_context(cafile=ca_file) if ca_file else None
        # One context for every httpx client this client makes: httpx builds a new one from the trust store
        # for each client given verify=True, and a failover makes a new client, so the first request on the
        # next server waited for the store to load again (1.2 s of CPU per failover at load 30 on 2 cores;
        # bench/apiserver_failover.py). client-go keeps its one transport's TLS config across retries too.
        self._verify: ssl.SSLContext = self._ssl if self._ssl is not None else httpx.create_ssl_context()
        # `uds`: reach the server on this Unix socket instead (`kubelab up`'s components, on the API
        # server's private socket); `server` then only names it in URLs.
        self._uds = uds
        self._headers = headers
        self._timeout = timeout
        self._http = self._httpx_client()
        self._retired: list[Any] = []  # the clients of servers failed over from, closed with this one
        self._fast = fast_requests
        self._session: Any = None  # aiohttp.ClientSession, made in the running loop on first use
        # `app`: the API server's ASGI application in this process (`kubelab up`'s components): every
        # request and watch is handed to it directly (asgi.py), through all of its handlers, no socket.
        self._asgi = AsgiTransport(app, host=httpx.URL(self.server).host) if app is not None else None
        # `write_fence`: called before every write is sent (a leader-elected component's LeaderElector.check):
        # it raises when this replica may no longer act, and the write is not sent.
        self._write_fence = write_fence

    def _httpx_client(self) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        verify = self._verify
        transport = httpx.AsyncHTTPTransport(uds=self._uds, limits=limits, verify=verify) if self._uds else None
        return httpx.AsyncClient(base_url=self.server, headers=self._headers, timeout=self._timeout, limits=limits,
                                 verify=verify, transport=transport)

    def _fail_over(self, failed: str, why: str = "cannot be reached") -> bool:
        """`failed` could not be reached (or answered 503): move to the next API server, if there is another
        (requests in flight on the old one finish or fail there). Several requests failing at once move it
        once. Watches fail over by failing: the informer watches again from its last resourceVersion, now
        on the next server, as a client behind a load balancer would."""
        if len(self.servers) < 2 or self._asgi is not None or self._uds is not None:
            return False
        if failed == self.server:
            self.server = self.servers[(self.servers.index(failed) + 1) % len(self.servers)]
            self._retired.append(self._http)
            self._http = self._httpx_client()
            if self._session is not None:
                self._retired.append(self._session)
                self._session = None
            log.warning("API server %s %s: using %s", failed, why, self.server)
        return True

    async def close(self) -> None:
        await self._http.aclose()
        for old in self._retired:
            await (old.aclose() if isinstance(old, httpx.AsyncClient) else old.close())
        self._retired.clear()
        if self._asgi is not None:
            await self._asgi.aclose()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _aiohttp(self) -> Any:
        import aiohttp

        if self._session is None:
            connector = (aiohttp.UnixConnector(path=self._uds, limit=200) if self._uds else
                         aiohttp.TCPConnector(limit=200, ssl=self._ssl if self._ssl is not None else True))
            self._session = aiohttp.ClientSession(
                base_url=self.server, headers=self._headers, timeout=aiohttp.ClientTimeout(total=self._timeout),
                connector=connector)
        return self._session

    async def _fast_request(self, method: str, path: str, content: bytes | None, params: dict[str, Any] | None,
                            headers: dict[str, str] | None) -> tuple[int, bytes, str | None]:
        import aiohttp

        session = self._aiohttp()
        query = {k: str(v) for k, v in params.items()} if params else None
        try:
            async with session.request(method, path, data=content, params=query, headers=headers) as resp:
                return resp.status, await resp.read(), resp.headers.get("Retry-After")
        except aiohttp.ClientConnectorError as exc:  # no connection: the request never left
            raise NotSent(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientConnectionError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientPayloadError as exc:  # the answer cut off mid-body
            raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
        except TimeoutError as exc:
            raise httpx.TimeoutException(f"{method} {path} timed out") from exc

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plumbing ------------------------------------------------------------------------------

    async def request(self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None,
                      content_type: str = "application/json") -> Any:
        content = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type} if content is not None else None
        unavailable = 0  # 503s answered, each by another server
        for attempt in range(MAX_RETRIES + 1):
            unreachable = 0
            while True:
                if self._write_fence is not None and method not in SAFE_METHODS:
                    self._write_fence()  # checked before each try: a Retry-After wait may outlast the term
                server = self.server
                try:
                    status, raw, retry_after = await self._send(method, path, content, params, headers)
                    break
                except httpx.TransportError as exc:
                    if not self._fail_over(server):
                        raise
                    unreachable += 1
                    # Sent, or every server tried: the caller decides (a write may have landed).
                    if not _not_sent(exc, fast=self._fast) or unreachable >= len(self.servers):
                        raise
            # 503: that server cannot serve now (its etcd unreachable or without quorum, seen as "etcd is
            # unavailable"): move to the next one. A read is asked there at once, each server once; a write
            # is not sent again (it may have reached etcd before the error: the caller decides, as after a
            # cut connection), but the caller's next request goes to the next server.
            if status == 503 and self._fail_over(server, "answered 503"):
                unavailable += 1
                if method in SAFE_METHODS and unavailable < len(self.servers):
                    continue
                break
            # client-go's retry: a 429 with Retry-After was refused before any work was done (the API
            # server's in-flight limit); wait as told and send it again, up to 10 times.
            wait = _retry_after_seconds(retry_after)
            if status != 429 or wait is None or attempt == MAX_RETRIES:
                break
            await asyncio.sleep(wait)
        try:
            data = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            data = raw.decode("utf-8", "replace").strip()  # an answer that is not a Status (429's text)
        if status >= 400:
            raise ApiError.from_status(status, data)
        return data

    async def _send(self, method: str, path: str, content: bytes | None, params: dict[str, Any] | None,
                    headers: dict[str, str] | None) -> tuple[int, bytes, str | None]:
        if self._asgi is not None:
            sent = {**self._headers, **(headers or {})}
            answer, raw = await self._asgi.request(method, path, params=params, headers=sent, body=content,
                                                   timeout=self._timeout)
            return answer.status, raw, answer.header("Retry-After")
        if self._fast:
            return await self._fast_request(method, path, content, params, headers)
        resp = await self._http.request(method, path, content=content, params=params, headers=headers)
        return resp.status_code, resp.content, resp.headers.get("Retry-After")

    async def get_raw(self, path: str, *, params: dict[str, Any] | None = None) -> tuple[int, str]:
        """A GET's status code and body text, whatever the code, with no retry and no failover: what `kubectl
        get --raw` shows (the health endpoints, kubelab's trace records) for a tool to print as it came."""
        status, raw, _ = await self._send("GET", path, None, params, None)
        return status, raw.decode("utf-8", "replace")

    @staticmethod
    def _decode(rt: ResourceType, data: dict[str, Any]) -> Any:
        data.setdefault("apiVersion", rt.api_version)
        data.setdefault("kind", rt.kind)
        return rt.model.model_validate(data)

    # --- verbs ---------------------------------------------------------------------------------

    async def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> Any:
        return self._decode(rt, await self.request("GET", rt.path(namespace, name)))

    async def list(self, rt: ResourceType, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, on_undecodable: Undecodable | None = None,
                   resource_version: str | None = None) -> tuple[list[Any], str]:
        """`resource_version`: kube's LIST semantics: None or "" a consistent read, "0" whatever the server's
        watch cache holds, N anything not older than N."""
        data = await self.request("GET", rt.path(namespace), params=_params(
            labelSelector=label_selector, fieldSelector=field_selector, resourceVersion=resource_version))
        items = []
        for item in data.get("items") or []:
            try:
                items.append(self._decode(rt, item))
            except pydantic.ValidationError as exc:
                if on_undecodable is None:
                    raise
                on_undecodable(None, item, exc)
        return items, str((data.get("metadata") or {}).get("resourceVersion") or "")

    async def create(self, rt: ResourceType, obj: models.TypedObject | dict[str, Any],
                     namespace: str | None = None) -> Any:
        body = obj.to_dict() if isinstance(obj, models.Model) else obj
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        return self._decode(rt, await self.request("POST", rt.path(ns), body=body))

    async def update(self, rt: ResourceType, obj: models.TypedObject, *, subresource: str | None = None) -> Any:
        return self._decode(rt, await self._put(rt, obj, subresource))

    async def update_metadata(self, rt: ResourceType, obj: models.TypedObject) -> models.ObjectMeta:
        """update, decoding only the metadata of the object stored: for a writer that keeps no copy of what it
        wrote (the endpoints controller: an Endpoints of 1,000 addresses took longer to decode than to write)."""
        data = await self._put(rt, obj, None)
        return models.ObjectMeta.model_validate(data.get("metadata") or {})

    async def _put(self, rt: ResourceType, obj: models.TypedObject, subresource: str | None) -> Any:
        return await self.request("PUT", rt.path(obj.metadata.namespace, obj.metadata.name, subresource),
                                  body=obj.to_dict())

    async def update_status(self, rt: ResourceType, obj: models.TypedObject) -> Any:
        return await self.update(rt, obj, subresource="status")

    async def patch(self, rt: ResourceType, name: str, patch: Any, namespace: str | None = None, *,
                    content_type: str = "application/merge-patch+json", subresource: str | None = None) -> Any:
        return self._decode(rt, await self.request(
            "PATCH", rt.path(namespace, name, subresource), body=patch, content_type=content_type))

    async def delete(self, rt: ResourceType, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, uid: str | None = None,
                     propagation_policy: str | None = None) -> Any:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            body["propagationPolicy"] = propagation_policy
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request("DELETE", rt.path(namespace, name), body=body)

    async def bind(self, pod: models.Pod, node_name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace,
                             "uid": pod.metadata.uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        await self.request("POST", kinds.PODS.path(pod.metadata.namespace, pod.metadata.name, "binding"), body=body)

    async def watch(self, rt: ResourceType, namespace: str | None = None, *, resource_version: str | None = None,
                    label_selector: str | None = None, field_selector: str | None = None,
                    timeout_seconds: int | None = None, allow_bookmarks: bool = False,
                    on_undecodable: Undecodable | None = None) -> AsyncIterator[WatchEvent]:
        """Stream watch events until the server ends the watch; an ERROR event raises ApiError. An event
        whose object does not fit the model goes to `on_undecodable` and is not yielded."""
        params = _params(watch="true", resourceVersion=resource_version, labelSelector=label_selector,
                         fieldSelector=field_selector, timeoutSeconds=timeout_seconds,
                         allowWatchBookmarks="true" if allow_bookmarks else None)
        lines = self._asgi_watch_lines if self._asgi is not None else \
            self._fast_watch_lines if self._fast else self._watch_lines
        async for line in self._failing_over(lines(rt.path(namespace), params)):
            if not line.strip():
                continue
            event = orjson.loads(line)
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise ApiError.from_status(int(status.get("code") or 500), status)
            try:
                obj = self._decode(rt, event["object"])
            except pydantic.ValidationError as exc:
                if on_undecodable is None:
                    raise
                on_undecodable(str(event.get("type")), event["object"], exc)
                continue
            yield WatchEvent(event["type"], obj)

    async def _failing_over(self, lines: AsyncGenerator[bytes | str, None]) -> AsyncIterator[bytes | str]:
        """A watch's lines; a transport failure moves the client to the next server before it is raised."""
        server = self.server
        async with contextlib.aclosing(lines):
            try:
                async for line in lines:
                    yield line
            except httpx.TransportError:
                self._fail_over(server)
                raise
            except ApiError as exc:
                if exc.code == 503:  # the watch was refused by a server that cannot serve: the next one's turn
                    self._fail_over(server, "answered 503")
                raise

    async def _watch_lines(self, path: str, params: dict[str, Any]) -> AsyncGenerator[bytes | str, None]:
        timeout = httpx.Timeout(30.0, read=None)
        async with self._http.stream("GET", path, params=params, timeout=timeout) as resp:
            if resp.status_code >= 400:
                body = await resp.aread()
                raise ApiError.from_status(resp.status_code, orjson.loads(body) if body else None)
            async for line in resp.aiter_lines():
                yield line

    async def _asgi_watch_lines(self, path: str, params: dict[str, Any]) -> AsyncGenerator[bytes | str, None]:
        """The watch stream's lines from the in-process API server (`app`)."""
        assert self._asgi is not None
        async with self._asgi.stream("GET", path, params=params, headers=self._headers,
                                     connect_timeout=self._timeout) as (resp, chunks):
            if resp.status >= 400:
                body = b"".join([chunk async for chunk in chunks])
                raise ApiError.from_status(resp.status, orjson.loads(body) if body else None)
            partial = b""
            async for chunk in chunks:
                *complete, partial = (partial + chunk).split(b"\n")
                for line in complete:
                    yield line
            if partial:
                yield partial

    async def _fast_watch_lines(self, path: str, params: dict[str, Any]) -> AsyncGenerator[bytes | str, None]:
        """The watch stream's lines through aiohttp (fast_requests): httpx's line decoding was the
        largest share of the scheduler's CPU per watch event. Failures raise httpx's errors, as above."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=None)
        query = {k: str(v) for k, v in params.items()}
        try:
            async with self._aiohttp().get(path, params=query, timeout=timeout) as resp:
                if resp.status >= 400:
                    body = await resp.read()
                    raise ApiError.from_status(resp.status, orjson.loads(body) if body else None)
                partial = b""
                async for chunk in resp.content.iter_any():
                    *complete, partial = (partial + chunk).split(b"\n")
                    for line in complete:
                        yield line
                if partial:
                    yield partial
        except aiohttp.ClientConnectionError as exc:  # server gone, or the stream cut mid-chunk
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientPayloadError as exc:
            raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
