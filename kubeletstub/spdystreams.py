"""exec and port-forward over SPDY/3.1 (streaming/spdy.py), as kubelet's streaming server serves
kubectl 1.29 and every kubectl whose WebSocket upgrade was refused.

exec (remotecommand v4, v3, v2, v1 over SPDY): the client opens one stream per channel it wants, its
`streamtype` header saying which (error, stdin, stdout, stderr, resize); the session starts once every
expected stream is there (kubelet waits 30 s, streamCreationTimeout). stdin's end is the stdin stream's
FIN; resizes are JSON objects, one after another, on the resize stream.

port-forward (`portforward.k8s.io`): per forwarded connection the client opens an error stream and a
data stream, both naming the `port` and the same `requestid`; the pair gets one TCP connection to the
pod. The same protocol runs inside a WebSocket (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+), the SPDY
bytes carried in binary messages (WebSocketBytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Collection

from kubelab.validation import is_ascii_digits

from . import portforward
from .execsession import ClientGone
from .streaming import channels
from .streaming.spdy import SpdyConnection, SpdyError, SpdyStream
from .streaming.websocket import ConnectionClosed, WebSocket, WebSocketError

STREAM_CREATION_TIMEOUT = 30.0
CHANNEL_OF = {"stdin": channels.STDIN, "stdout": channels.STDOUT, "stderr": channels.STDERR,
              "error": channels.ERROR, "resize": channels.RESIZE}
EXEC_PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORTFORWARD_PROTOCOL = "portforward.k8s.io"
TUNNELED_PORTFORWARD = "SPDY/3.1+portforward.k8s.io"
_GONE = -1


def negotiate(offered: str, supported: Collection[str]) -> str | None:
    """httpstream.Handshake: the first of the client's X-Stream-Protocol-Version values the server
    serves; None when none is (kube answers 403 with the list it serves)."""
    for value in (v.strip() for v in offered.split(",")):
        if value in supported:
            return value
    return None


async def accept_streams(conn: SpdyConnection, expected: Collection[str]) -> dict[str, SpdyStream] | None:
    """The streams the client opens until every expected type is there; None when the client goes away
    or takes longer than kubelet waits."""
    found: dict[str, SpdyStream] = {}

    async def collect() -> None:
        while not set(expected) <= set(found):
            stream = await conn.accept()
            if stream is None:
                raise ClientGone("connection ended")
            found.setdefault(stream.headers.get("streamtype", ""), stream)

    try:
        await asyncio.wait_for(collect(), STREAM_CREATION_TIMEOUT)
    except (TimeoutError, ClientGone):
        return None
    return found


class SpdyChannels:
    """execsession.Channels over the client's SPDY streams."""

    def __init__(self, conn: SpdyConnection, streams: dict[str, SpdyStream], protocol: str,
                 running: asyncio.Task[None]) -> None:
        self.conn = conn
        self.by_channel = {CHANNEL_OF[t]: s for t, s in streams.items() if t in CHANNEL_OF}
        self.structured_status = protocol == "v4.channel.k8s.io"
        self._events: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._until_gone(running), name="spdy-gone")]
        if channels.STDIN in self.by_channel:
            self._tasks.append(asyncio.create_task(self._stdin(self.by_channel[channels.STDIN]), name="spdy-stdin"))
        if channels.RESIZE in self.by_channel:
            self._tasks.append(asyncio.create_task(self._resize(self.by_channel[channels.RESIZE]), name="spdy-resize"))

    async def _until_gone(self, running: asyncio.Task[None]) -> None:
        await asyncio.shield(running)
        self._events.put_nowait((_GONE, b""))

    async def _stdin(self, stream: SpdyStream) -> None:
        while data := await stream.read():
            self._events.put_nowait((channels.STDIN, data))
        self._events.put_nowait((channels.CLOSE_SIGNAL, bytes([channels.STDIN])))

    async def _resize(self, stream: SpdyStream) -> None:
        decoder = json.JSONDecoder()
        buffer = ""
        while data := await stream.read():
            buffer += data.decode("utf-8", "replace")
            while buffer.strip():
                try:
                    size, end = decoder.raw_decode(buffer.lstrip())
                except ValueError:
                    break  # an object not complete yet
                buffer = buffer.lstrip()[end:]
                self._events.put_nowait((channels.RESIZE, json.dumps(size).encode()))
            if len(buffer) > 4096:
                buffer = ""  # not JSON at all: dropped, as kubelet's decoder would stop

    async def send(self, channel: int, data: bytes) -> None:
        stream = self.by_channel.get(channel)
        if stream is None:
            return
        try:
            await stream.write(data)
        except (SpdyError, ConnectionError) as exc:
            raise ClientGone(str(exc)) from exc

    async def receive(self) -> tuple[int, bytes]:
        channel, data = await self._events.get()
        if channel == _GONE:
            raise ClientGone("connection ended")
        return channel, data

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for stream in self.by_channel.values():
            await stream.close()
        await self.conn.close()


class WebSocketBytes:
    """A byte stream over a WebSocket's binary messages (the tunnel of SPDY/3.1+portforward.k8s.io)."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.reader = asyncio.StreamReader()
        self._pending: list[bytes] = []
        self._pump = asyncio.create_task(self._read(), name="ws-tunnel")

    async def _read(self) -> None:
        try:
            while True:
                _, payload = await self.ws.receive()
                self.reader.feed_data(payload)
        except (ConnectionClosed, WebSocketError, ConnectionError):
            pass
        finally:
            self.reader.feed_eof()

    async def readexactly(self, n: int) -> bytes:
        return await self.reader.readexactly(n)

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    async def drain(self) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        if data:
            try:
                await self.ws.send(data)
            except ConnectionClosed as exc:
                raise ConnectionResetError(str(exc)) from exc

    def close(self) -> None:
        self._pump.cancel()
        self.ws.writer.close()


async def _forward_pair(error: SpdyStream, data: SpdyStream, netns: str | None, pod: str) -> None:
    """One forwarded connection: the pod's port on the data stream, failures on the error stream."""
    text = data.headers.get("port", "")
    try:
        if not is_ascii_digits(text) or not 0 < int(text) < 65536:
            raise ValueError(f'invalid port "{text}"')
        port = int(text)
        reader, writer = await portforward.connect_in_netns(netns, port)
    except (OSError, ValueError) as exc:
        message = portforward.dial_error(int(text), pod, exc) if isinstance(exc, OSError) else str(exc)
        with contextlib.suppress(SpdyError, ConnectionError):
            await error.write(message.encode())
        await error.close()
        await data.close()
        return

    async def upstream() -> None:
        while chunk := await data.read():
            writer.write(chunk)
            await writer.drain()
        with contextlib.suppress(OSError, RuntimeError):
            writer.write_eof()

    async def downstream() -> None:
        while chunk := await reader.read(portforward.READ_SIZE):
            await data.write(chunk)
        await data.close()

    sending = asyncio.create_task(upstream(), name="portforward-up")
    try:
        # As the runtime's PortForward: done when the pod's side is (the client's FIN on the data stream
        # only half-closes the pod connection). Then both streams end, which kubectl waits for.
        await downstream()
    except (SpdyError, ConnectionError, OSError):
        pass
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        writer.close()
        await data.close()
        await error.close()


async def serve_port_forward(conn: SpdyConnection, netns: str | None, pod: str) -> None:
    """Pairs the client's error and data streams by request id and forwards each pair, until the client
    goes away; then every connection to the pod is closed."""
    running = asyncio.create_task(conn.run(), name="spdy-portforward")
    waiting: dict[str, dict[str, SpdyStream]] = {}
    forwards: set[asyncio.Task[None]] = set()
    try:
        while (stream := await conn.accept()) is not None:
            kind = stream.headers.get("streamtype", "")
            # Older clients send no requestid: kubelet pairs the error stream n with the data stream n+2.
            key = stream.headers.get("requestid") or str(stream.id if kind == "error" else stream.id - 2)
            pair = waiting.setdefault(key, {})
            pair[kind] = stream
            if "error" in pair and "data" in pair:
                del waiting[key]
                task = asyncio.create_task(_forward_pair(pair["error"], pair["data"], netns, pod),
                                           name=f"portforward-{key}")
                forwards.add(task)
                task.add_done_callback(forwards.discard)
    finally:
        for task in list(forwards):
            task.cancel()
        await asyncio.gather(*forwards, return_exceptions=True)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await conn.close()
