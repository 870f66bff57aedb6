"""`kubectl port-forward` as kubelet serves it: a TCP connection to the pod's port, made inside the pod's
network namespace to 127.0.0.1 (kubelet's runtime connects to localhost in the sandbox's namespace, so
servers bound to loopback are reached too), its bytes carried on the stream's channels.

Over WebSocket (wsstream portforward, `v4.channel.k8s.io`): for the i-th port of `?ports=`, channel 2i
carries data and 2i+1 errors, each opened by the port in 2 bytes little-endian; one connection per
port for the life of the WebSocket, which ends when every connection has.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Sequence
from typing import Any

from kubelab.netnsthread import run_in_netns
from kubelab.validation import is_ascii_digits

from .streaming import channels
from .streaming.websocket import TEXT, ConnectionClosed, WebSocket, WebSocketError

READ_SIZE = 64 * 1024


def parse_ports(values: Sequence[str]) -> list[int]:
    """kubelet's NewV4Options: every `ports` value, each a comma-separated list; kube's error words."""
    if not values:
        raise ValueError('query parameter "port" is required')
    ports: list[int] = []
    for value in values:
        if not value:
            raise ValueError('query parameter "port" cannot be empty')
        for text in value.split(","):
            if not is_ascii_digits(text) or int(text) > 65535:
                raise ValueError(f'unable to parse "{value}" as a port: strconv.ParseUint: parsing "{text}": '
                                 "invalid syntax")
            if int(text) < 1:
                raise ValueError(f'port "{value}" must be > 0')
            ports.append(int(text))
    return ports


async def connect_in_netns(netns: str | None, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to 127.0.0.1:`port` inside `netns` (None: this namespace). The socket is made in
    the namespace (netnsthread) and used on this loop, as every socket of the lab is."""
    sock = run_in_netns(netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM), name="portforward")
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


def dial_error(port: int, pod: str, exc: OSError) -> str:
    reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return (f"error forwarding port {port} to pod {pod}, uid : failed to connect to localhost:{port} inside "
            f"namespace, IPv4: dial tcp4 127.0.0.1:{port}: connect: {reason}")


class WebSocketPortForward:
    def __init__(self, ws: WebSocket, codec: channels.Codec, netns: str | None, ports: Sequence[int], *,
                 pod: str = "") -> None:
        self.ws = ws
        self.codec = codec
        self.netns = netns
        self.ports = list(ports)
        self.pod = pod
        self._writers: dict[int, asyncio.StreamWriter] = {}
        # One per port, resolved once its connection to the pod is made (False: it could not be). A data
        # message read before that waits for it, as kubelet's pipe holds the bytes until its dial is done.
        self._connected: dict[int, asyncio.Future[bool]] = {}

    async def send(self, channel: int, data: bytes) -> None:
        is_text, payload = self.codec.encode(channel, data)
        await self.ws.send(payload, opcode=TEXT if is_text else 2)

    async def _forward(self, index: int, port: int) -> None:
        try:
            reader, writer = await connect_in_netns(self.netns, port)
        except OSError as exc:
            self._connected[index].set_result(False)
            await self.send(2 * index + 1, dial_error(port, self.pod, exc).encode())
            return
        self._writers[index] = writer
        self._connected[index].set_result(True)
        try:
            while data := await reader.read(READ_SIZE):
                await self.send(2 * index, data)
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.pop(index, None)
            writer.close()

    async def _receive(self) -> None:
        while True:
            _, payload = await self.ws.receive()
            try:
                channel, data = self.codec.decode(payload)
            except channels.ProtocolError:
                continue
            if channel % 2 or not data or channel // 2 >= len(self.ports):
                continue
            await self._connected[channel // 2]
            writer = self._writers.get(channel // 2)
            if writer is not None:
                writer.write(data)
                with contextlib.suppress(ConnectionError):
                    await writer.drain()

    async def run(self) -> None:
        receiver: asyncio.Task[None] | None = None
        forwards: list[asyncio.Task[None]] = []
        every_forward: asyncio.Future[Any] | None = None
        try:
            for index, port in enumerate(self.ports):
                await self.send(2 * index, channels.port_prefix(port))
                await self.send(2 * index + 1, channels.port_prefix(port))
            loop = asyncio.get_running_loop()
            self._connected = {index: loop.create_future() for index in range(len(self.ports))}
            receiver = asyncio.create_task(self._receive(), name="portforward-receive")
            forwards = [asyncio.create_task(self._forward(i, p), name=f"portforward-{p}")
                        for i, p in enumerate(self.ports)]
            every_forward = asyncio.gather(*forwards)
            waiters: list[asyncio.Future[Any]] = [receiver, every_forward]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except (ConnectionClosed, WebSocketError, ConnectionError):
            pass
        finally:
            for task in (*forwards, *([receiver] if receiver else [])):
                task.cancel()
            # The gather too is awaited here: when the client ends the session first, its forwards end
            # cancelled and the gather holds that CancelledError; left unretrieved, the loop reports it.
            await asyncio.gather(*forwards, *([receiver] if receiver else []),
                                 *([every_forward] if every_forward else []), return_exceptions=True)
            for writer in list(self._writers.values()):
                writer.close()
            await self.ws.close()
