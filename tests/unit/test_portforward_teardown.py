"""A port-forward session the client ends leaves nothing unretrieved on the kubelet's loop.

kr8s's port-forward tests (its own suite, run against `kubelab up`) close the WebSocket while the connection
to the pod's port is still open, as a browser or `kubectl port-forward` stopped with Ctrl-C does. kubelet
then closes its side without a word in its log; kubelab's loop reported "_GatheringFuture exception was never
retrieved" with a CancelledError traceback for each such session. Real sockets: a TCP server stands for the
pod's port, a socketpair carries the WebSocket.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

from kubeletstub import portforward
from kubeletstub.streaming import channels, websocket


async def test_client_close_with_the_pods_connection_open_reports_nothing() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    connected = asyncio.Event()

    async def pod_port(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        await reader.read()  # an idle server: holds the connection until the kubelet closes it
        writer.close()

    server = await asyncio.start_server(pod_port, "127.0.0.1", 0)
    kubelet_end, client_end = socket.socketpair()
    try:
        port = server.sockets[0].getsockname()[1]
        kubelet_ws = websocket.WebSocket(*await asyncio.open_connection(sock=kubelet_end), client=False,
                                         subprotocol=channels.V4)
        client_ws = websocket.WebSocket(*await asyncio.open_connection(sock=client_end), client=True,
                                        subprotocol=channels.V4)
        session = asyncio.create_task(
            portforward.WebSocketPortForward(kubelet_ws, channels.Codec(channels.V4), None, [port]).run())
        await connected.wait()
        await client_ws.close()
        await session
        gc.collect()
        await asyncio.sleep(0)  # let any callback a collected future scheduled run
        assert [c.get("message") for c in reported] == []
    finally:
        loop.set_exception_handler(None)
        server.close()
        await server.wait_closed()
        kubelet_end.close()
        client_end.close()


async def test_bytes_sent_before_the_pods_connection_is_made_reach_the_pod() -> None:
    """The Python client writes its request as soon as it has the socket; the kubelet may read that message
    before its connection to the pod's port is made (under load, the namespace thread makes the socket).
    kubelet's port-forward reads each data channel through a pipe, so those bytes wait for the connection;
    kubelab dropped them, and the client read an empty answer (CI: test_python_client_exec_and_port_forward).
    Here the request is on the wire before the session starts, so it is read first every time."""

    async def pod_port(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"echo:" + await reader.readexactly(5))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(pod_port, "127.0.0.1", 0)
    kubelet_end, client_end = socket.socketpair()
    codec = channels.Codec(channels.V4)
    try:
        port = server.sockets[0].getsockname()[1]
        client_ws = websocket.WebSocket(*await asyncio.open_connection(sock=client_end), client=True,
                                        subprotocol=channels.V4)
        await client_ws.send(codec.encode(0, b"hello")[1])
        kubelet_ws = websocket.WebSocket(*await asyncio.open_connection(sock=kubelet_end), client=False,
                                         subprotocol=channels.V4)
        session = asyncio.create_task(portforward.WebSocketPortForward(kubelet_ws, codec, None, [port]).run())
        received: dict[int, bytes] = {}
        while True:
            try:
                _, payload = await asyncio.wait_for(client_ws.receive(), 30)
            except websocket.ConnectionClosed:
                break
            channel, data = codec.decode(payload)
            received[channel] = received.get(channel, b"") + data
        await session
        assert received == {0: channels.port_prefix(port) + b"echo:hello", 1: channels.port_prefix(port)}
    finally:
        server.close()
        await server.wait_closed()
        kubelet_end.close()
        client_end.close()
