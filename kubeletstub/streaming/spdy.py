"""SPDY/3.1 as kube's httpstream speaks it (k8s.io/apimachinery/pkg/util/httpstream/spdy over
moby/spdystream): the server end of a connection whose client opens the streams.

Frames (SPDY draft 3): 8-byte headers; control frames (SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS,
PING, GOAWAY, HEADERS, WINDOW_UPDATE) carry the version 3 and a type, data frames a stream id. Header
blocks are name/value pairs (4-byte lengths) compressed with one zlib stream per direction, primed
with SPDY's dictionary and sync-flushed after every block. spdystream does no flow control (it neither
sends nor honours WINDOW_UPDATE), and neither does this end.

The client opens every stream (odd ids) with headers saying what it is for (`streamtype: stdout`,
`port: 8080`); the server answers each with an empty SYN_REPLY, then both send data; a data frame with
the FIN flag half-closes the stream for its sender. PINGs are echoed (kubectl pings every few seconds
on long streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
MAX_FRAME = 16 * 1024 * 1024 - 1  # 24-bit lengths
MAX_HEADER_BLOCK = 256 * 1024
DATA_CHUNK = 32 * 1024
RST_PROTOCOL_ERROR, RST_INVALID_STREAM, RST_REFUSED_STREAM, RST_CANCEL = 1, 2, 3, 5

# The SPDY/3 header compression dictionary (draft 3, section 2.6.10.1): these words, each with a
# 4-byte big-endian length in front, then the common values run together; 1423 bytes in all.
_DICTIONARY_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin",
)
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack("!I", len(w)) + w.encode() for w in _DICTIONARY_WORDS) + _DICTIONARY_TAIL.encode()


class SpdyError(Exception):
    """The peer broke SPDY's framing, or the connection ended."""


class ByteReader(Protocol):
    async def readexactly(self, n: int) -> bytes: ...


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


def encode_headers(headers: Mapping[str, str]) -> bytes:
    out = [struct.pack("!I", len(headers))]
    for name, value in headers.items():
        n, v = name.lower().encode(), value.encode()
        out += [struct.pack("!I", len(n)), n, struct.pack("!I", len(v)), v]
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, str]:
    """Name/value pairs; a name seen twice keeps its first value; several values (NUL-separated) keep the
    first, as http.Header.Get reads them."""
    try:
        (count,) = struct.unpack_from("!I", block, 0)
        offset = 4
        headers: dict[str, str] = {}
        for _ in range(count):
            (size,) = struct.unpack_from("!I", block, offset)
            name = block[offset + 4:offset + 4 + size].decode("latin-1")
            offset += 4 + size
            (size,) = struct.unpack_from("!I", block, offset)
            value = block[offset + 4:offset + 4 + size].decode("latin-1")
            offset += 4 + size
            headers.setdefault(name.lower(), value.split("\x00")[0])
        return headers
    except struct.error as exc:
        raise SpdyError("malformed header block") from exc


def control_frame(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack("!HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, flags: int, payload: bytes) -> bytes:
    return struct.pack("!II", stream_id & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload


@dataclass(eq=False)
class SpdyStream:
    """One stream the client opened: its headers, what it sent (b"" once it half-closed), and a way back."""

    conn: SpdyConnection
    id: int
    headers: dict[str, str]
    _incoming: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    remote_closed: bool = False
    local_closed: bool = False

    async def read(self) -> bytes:
        """The next data, b"" at the client's end of the stream (or of the connection)."""
        if self.remote_closed and self._incoming.empty():
            return b""
        data = await self._incoming.get()
        if not data:
            self.remote_closed = True
        return data

    async def write(self, data: bytes) -> None:
        if self.local_closed:
            return
        for start in range(0, len(data), DATA_CHUNK):
            await self.conn.send(data_frame(self.id, 0, data[start:start + DATA_CHUNK]))

    async def close(self) -> None:
        """Half-close: a FIN, once."""
        if not self.local_closed:
            self.local_closed = True
            with contextlib.suppress(SpdyError, ConnectionError):
                await self.conn.send(data_frame(self.id, FLAG_FIN, b""))

    async def reset(self) -> None:
        self.local_closed = True
        with contextlib.suppress(SpdyError, ConnectionError):
            await self.conn.send(control_frame(RST_STREAM, 0, struct.pack("!II", self.id, RST_CANCEL)))

    def _received(self, data: bytes, *, fin: bool) -> None:
        if data:
            self._incoming.put_nowait(data)
        if fin:
            self._incoming.put_nowait(b"")


class SpdyConnection:
    """The server end. `run()` reads frames until the connection ends; `accept()` hands out the streams
    the client opens, in order (None once the connection has ended)."""

    def __init__(self, reader: ByteReader, writer: ByteWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.streams: dict[int, SpdyStream] = {}
        self._new: asyncio.Queue[SpdyStream | None] = asyncio.Queue()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY,
                                         DICTIONARY)
        self._write_lock = asyncio.Lock()
        self.closed = False

    async def send(self, frame: bytes) -> None:
        if self.closed:
            raise SpdyError("connection closed")
        async with self._write_lock:
            self.writer.write(frame)
            await self.writer.drain()

    async def accept(self) -> SpdyStream | None:
        return await self._new.get()

    def _headers_of(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as exc:
            raise SpdyError(f"header block: {exc}") from exc
        if self._inflate.unconsumed_tail:
            raise SpdyError("header block too large")
        return decode_headers(raw)

    async def _reply(self, stream_id: int) -> None:
        async with self._write_lock:
            # Compressing shares one zlib stream per direction: blocks must go out in the order made.
            block = self._deflate.compress(encode_headers({})) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
            self.writer.write(control_frame(SYN_REPLY, 0, struct.pack("!I", stream_id) + block))
            await self.writer.drain()

    async def run(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(8)
                first, second = struct.unpack("!II", head)
                flags, length = second >> 24, second & 0xFFFFFF
                payload = await self.reader.readexactly(length) if length else b""
                if first & 0x80000000:
                    await self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, payload)
                else:
                    stream = self.streams.get(first & 0x7FFFFFFF)
                    if stream is not None:
                        stream._received(payload, fin=bool(flags & FLAG_FIN))
        except (asyncio.IncompleteReadError, ConnectionError, SpdyError):
            pass
        finally:
            self.closed = True
            for stream in self.streams.values():
                stream._received(b"", fin=True)
            self._new.put_nowait(None)

    async def _control(self, version: int, kind: int, flags: int, payload: bytes) -> None:
        if version != VERSION:
            raise SpdyError(f"unsupported SPDY version {version}")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise SpdyError("short SYN_STREAM")
            stream_id = struct.unpack_from("!I", payload, 0)[0] & 0x7FFFFFFF
            headers = self._headers_of(payload[10:])
            if stream_id in self.streams or stream_id % 2 == 0:
                await self.send(control_frame(RST_STREAM, 0, struct.pack("!II", stream_id, RST_PROTOCOL_ERROR)))
                return
            stream = SpdyStream(self, stream_id, headers)
            self.streams[stream_id] = stream
            await self._reply(stream_id)
            if flags & FLAG_FIN:
                stream._received(b"", fin=True)
            self._new.put_nowait(stream)
        elif kind == RST_STREAM and len(payload) >= 4:
            reset = self.streams.get(struct.unpack_from("!I", payload, 0)[0] & 0x7FFFFFFF)
            if reset is not None:
                reset.local_closed = True
                reset._received(b"", fin=True)
        elif kind == PING and len(payload) == 4:
            await self.send(control_frame(PING, 0, payload))
        elif kind == GOAWAY:
            raise SpdyError("the client went away")
        elif kind == HEADERS and len(payload) >= 4:
            self._headers_of(payload[4:])  # keeps the zlib stream in step; nothing uses late headers
        # SETTINGS and WINDOW_UPDATE: nothing to do (no flow control, as spdystream).

    async def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(SpdyError, ConnectionError):
                last = max(self.streams, default=0)
                await self.send(control_frame(GOAWAY, 0, struct.pack("!II", last, 0)))
            self.closed = True
        self.writer.close()
