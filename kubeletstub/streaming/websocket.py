"""WebSocket (RFC 6455) framing over asyncio streams, both ends: the kubelet serves it, the API server
dials the kubelet with it.

Only what kube's streaming uses: binary and text messages, ping/pong (client-go's WebSocket executor
pings every few seconds and gives up without pongs), close. No extensions (kube's golang.org/x/net
websocket and gorilla both negotiate none). Messages are bounded (MAX_MESSAGE): a client cannot make
the kubelet buffer more than that.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import struct
from dataclasses import dataclass

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_MESSAGE = 16 * 1024 * 1024
NORMAL_CLOSURE = 1000


class WebSocketError(Exception):
    """The peer broke the framing rules, or sent more than MAX_MESSAGE in one message."""


class ConnectionClosed(Exception):
    """The peer sent a close frame, or the connection ended."""


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def new_key() -> str:
    return base64.b64encode(os.urandom(16)).decode("ascii")


def _mask(data: bytes, key: bytes) -> bytes:
    if not data:
        return data
    # XOR with the 4-byte key repeated: done on one big integer, not byte by byte.
    repeated = (key * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(repeated, "big")).to_bytes(len(data), "big")


def encode_frame(opcode: int, payload: bytes, *, masked: bool) -> bytes:
    """One final frame. Clients mask what they send, servers do not (RFC 6455 §5.3)."""
    head = bytes([0x80 | opcode])
    mask_bit = 0x80 if masked else 0
    size = len(payload)
    if size < 126:
        head += bytes([mask_bit | size])
    elif size < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack("!H", size)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", size)
    if masked:
        key = os.urandom(4)
        return head + key + _mask(payload, key)
    return head + payload


@dataclass(frozen=True, slots=True)
class Frame:
    fin: bool
    opcode: int
    payload: bytes


async def read_frame(reader: asyncio.StreamReader, *, limit: int = MAX_MESSAGE) -> Frame:
    try:
        first, second = await reader.readexactly(2)
        size = second & 0x7F
        if size == 126:
            size = struct.unpack("!H", await reader.readexactly(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", await reader.readexactly(8))[0]
        if size > limit:
            raise WebSocketError(f"frame of {size} bytes exceeds the limit of {limit}")
        key = await reader.readexactly(4) if second & 0x80 else b""
        payload = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise ConnectionClosed("connection ended") from exc
    if first & 0x70:
        raise WebSocketError("reserved bits set without a negotiated extension")
    return Frame(bool(first & 0x80), first & 0x0F, _mask(payload, key) if key else payload)


class WebSocket:
    """One end of a WebSocket connection after the handshake. `client`: this end masks its frames.
    `receive()` answers pings itself and returns whole data messages (opcode, payload)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, client: bool,
                 subprotocol: str = "") -> None:
        self.reader = reader
        self.writer = writer
        self.client = client
        self.subprotocol = subprotocol
        self.closed = False
        self._write_lock = asyncio.Lock()

    async def send(self, payload: bytes, *, opcode: int = BINARY) -> None:
        if self.closed:
            raise ConnectionClosed("connection closed")
        async with self._write_lock:
            try:
                self.writer.write(encode_frame(opcode, payload, masked=self.client))
                await self.writer.drain()
            except (ConnectionError, RuntimeError) as exc:
                self.closed = True
                raise ConnectionClosed(str(exc)) from exc

    async def receive(self) -> tuple[int, bytes]:
        parts: list[bytes] = []
        opcode = 0
        total = 0
        while True:
            frame = await read_frame(self.reader)
            if frame.opcode == PING:
                await self.send(frame.payload, opcode=PONG)
                continue
            if frame.opcode == PONG:
                continue
            if frame.opcode == CLOSE:
                if not self.closed:
                    # Echo the close (RFC 6455 §5.5.1), then the connection is done.
                    try:
                        await self.send(frame.payload[:2], opcode=CLOSE)
                    except ConnectionClosed:
                        pass
                self.closed = True
                raise ConnectionClosed("close frame received")
            if frame.opcode in (TEXT, BINARY):
                if parts:
                    raise WebSocketError("new message inside a fragmented one")
                opcode = frame.opcode
            elif frame.opcode != CONTINUATION or not parts and not opcode:
                raise WebSocketError(f"unexpected opcode {frame.opcode}")
            parts.append(frame.payload)
            total += len(frame.payload)
            if total > MAX_MESSAGE:
                raise WebSocketError("message too large")
            if frame.fin:
                return opcode, b"".join(parts)

    async def close(self, code: int = NORMAL_CLOSURE) -> None:
        """Send a close frame (once) and close the transport."""
        if not self.closed:
            try:
                await self.send(struct.pack("!H", code), opcode=CLOSE)
            except ConnectionClosed:
                pass
            self.closed = True
        self.writer.close()
