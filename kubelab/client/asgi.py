"""An in-process transport for ApiClient: each request handed to the API server's ASGI application on the
same event loop, as one HTTP request (scope, body, response messages), with no socket and no HTTP bytes
on either side. `kubelab up` gives it to its own components: the request still goes through everything a
socket's request goes through (authentication, the request guard, admission, validation, the watch
cache), only uvicorn's parsing and the client's pool and parser are left out, which cost the process as
much as the API server's handlers under a scheduling burst (bench/up.py).

What a socket gave is kept: the application runs in a task of its own, so a caller that times out or is
cancelled does not cut a write off half-way (uvicorn also lets the handler finish after the client has
gone); a watch's events queue in a bounded buffer, so a consumer that stops reading blocks the API server's
send, and its watch cache treats that watcher as slow, as it would a full socket; closing a stream tells
the application the client disconnected. Failures raise httpx's errors, as the socket transports do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode

import httpx

log = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
App = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
               Awaitable[None]]

# Watch chunks buffered between the application and the consumer before the application's send waits.
STREAM_BUFFER = 256
# After a stream is closed, how long the application has to notice the disconnect before it is cancelled.
DISCONNECT_GRACE = 5.0


@dataclass
class Response:
    status: int
    headers: list[tuple[bytes, bytes]]

    def header(self, name: str) -> str | None:
        wanted = name.lower().encode()
        return next((v.decode("latin-1") for k, v in self.headers if k.lower() == wanted), None)


class AsgiTransport:
    """Requests to `app` (an ASGI application) as if to http://`host`."""

    def __init__(self, app: App, *, host: str) -> None:
        self.app = app
        self.host = host
        self._tasks: set[asyncio.Task[None]] = set()

    def _scope(self, method: str, path: str, params: dict[str, Any] | None, headers: dict[str, str],
               body: bytes | None) -> dict[str, Any]:
        raw = [(b"host", self.host.encode())]
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        if body is not None:
            raw.append((b"content-length", str(len(body)).encode()))
        query = urlencode({k: str(v) for k, v in params.items()}) if params else ""
        return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
                "server": None, "client": None, "scheme": "http", "root_path": "", "method": method,
                "path": unquote(path), "raw_path": path.encode(), "query_string": query.encode(),
                "headers": raw, "state": {}}

    def _start(self, scope: dict[str, Any], body: bytes | None, send: Callable[[Message], Awaitable[None]],
               disconnected: asyncio.Event) -> asyncio.Task[None]:
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body or b"", "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def run() -> None:
            await self.app(scope, receive, send)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)  # held until done: the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)
        return task

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None, headers: dict[str, str],
                      body: bytes | None, timeout: float) -> tuple[Response, bytes]:
        """One request, its whole answer."""
        response: Response | None = None
        chunks: list[bytes] = []
        complete = asyncio.Event()

        async def send(message: Message) -> None:
            nonlocal response
            if message["type"] == "http.response.start":
                response = Response(message["status"], list(message.get("headers") or []))
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body") or b""))
                if not message.get("more_body"):
                    complete.set()

        task = self._start(self._scope(method, path, params, headers, body), body, send, complete)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(task)
        except TimeoutError as exc:
            complete.set()  # the client is gone: a handler streaming its answer hears the disconnect
            raise httpx.TimeoutException(f"{method} {path} timed out") from exc
        except asyncio.CancelledError:
            complete.set()
            raise
        except Exception as exc:
            if response is not None and complete.is_set():
                return response, b"".join(chunks)
            if response is None:  # as uvicorn answers a handler that raised before answering
                log.exception("%s %s: the API server's handler raised", method, path)
                return Response(500, [(b"content-type", b"text/plain; charset=utf-8")]), b"Internal Server Error"
            raise httpx.RemoteProtocolError(f"{method} {path}: the answer was cut off: {exc}") from exc
        if response is None:
            raise httpx.RemoteProtocolError(f"{method} {path}: the API server sent no answer")
        return response, b"".join(chunks)

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, *, params: dict[str, Any] | None, headers: dict[str, str],
                     connect_timeout: float) -> AsyncIterator[tuple[Response, AsyncIterator[bytes]]]:
        """A streamed answer (a watch): its status and headers, and its body chunk by chunk. Leaving the
        context is the client disconnecting."""
        started: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue(STREAM_BUFFER)
        disconnected = asyncio.Event()
        completed = False  # the application sent its last body message

        async def send(message: Message) -> None:
            nonlocal completed
            if disconnected.is_set():
                return  # as uvicorn drops what is sent after the client has gone
            if message["type"] == "http.response.start":
                started.set_result(Response(message["status"], list(message.get("headers") or [])))
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await chunks.put(bytes(message["body"]))
                if not message.get("more_body"):
                    completed = True
                    await chunks.put(None)

        task = self._start(self._scope(method, path, params, headers, None), None, send, disconnected)

        def ended(done: asyncio.Task[None]) -> None:
            error = None if done.cancelled() else done.exception()
            if not started.done():
                started.set_exception(httpx.RemoteProtocolError(
                    f"{method} {path}: the API server sent no answer" + (f" ({error})" if error else "")))
            with contextlib.suppress(asyncio.QueueFull):
                chunks.put_nowait(None)  # wakes a consumer waiting for a chunk that will never come

        task.add_done_callback(ended)
        try:
            try:
                async with asyncio.timeout(connect_timeout):
                    response = await asyncio.shield(started)
            except TimeoutError as exc:
                raise httpx.ConnectTimeout(f"{method} {path}: no answer in {connect_timeout} s") from exc

            async def body() -> AsyncIterator[bytes]:
                while True:
                    if task.done() and chunks.empty():
                        break
                    chunk = await chunks.get()
                    if chunk is None:
                        break
                    yield chunk
                if not completed:  # ended without its last message: as a connection cut mid-stream
                    error = None if not task.done() or task.cancelled() else task.exception()
                    raise httpx.ReadError(f"{method} {path}: the stream broke" + (f": {error}" if error else ""))

            yield response, body()
        finally:
            disconnected.set()
            if not task.done():
                handle = asyncio.get_running_loop().call_later(DISCONNECT_GRACE, task.cancel)
                task.add_done_callback(lambda _: handle.cancel())

    async def aclose(self) -> None:
        """Cancel what is still running (a watch whose consumer never closed it)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
