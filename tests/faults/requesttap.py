"""A TCP forwarder in front of the API server that notes every HTTP request passing through it.

Each replica of a leader-elected component gets a tap of its own as its --server, so a test can tell
which replica sent what, and when (the tap's monotonic clock, in the test's process): the bytes go
through unchanged to the real API server; the tap only reads the request heads on their way
(Content-Length bodies are skipped; a chunked request body, which kubelab's clients do not send,
stops the noting for that connection and is counted in `unparsed`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    at: float  # time.monotonic() when the head had arrived
    method: str
    target: str  # path and query


class RequestTap:
    """Listens on a free loopback port (`port`) and forwards each connection to 127.0.0.1:`upstream`."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.requests: list[Request] = []
        self.unparsed = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="request-tap", daemon=True)
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RequestTap:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the request tap did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(30)

    def noted(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await self._forward(reader, writer)
            finally:
                tasks.discard(task)

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _forward(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(self._requests(client_r, server_w), self._pipe(server_r, client_w))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (client_w, server_w):
                w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client to server: note each request's head, pass every byte on."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    writer.write(exc.partial)
                writer.close()
                return
            arrived = time.monotonic()
            writer.write(head)
            lines = head.decode("latin-1").split("\r\n")
            method, target = (lines[0].split(" ") + ["", ""])[:2]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            with self._lock:
                self.requests.append(Request(arrived, method, target))
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.unparsed += 1
                await self._pipe(reader, writer)
                return
            length = int(headers.get("content-length") or 0)
            if length:
                writer.write(await reader.readexactly(length))
            await writer.drain()
