"""Attack classes of load rather than of one request's content: connections that never finish, floods of
LISTs and of writes, hostile numbers in parameters, writes through watch paths, and a watch cache fed
big objects. They join bench/hostile_attacks.py's registry when imported (bench/hostile.py does).

Connections are opened as raw sockets (asyncio streams): what an attacker holds is a TCP connection,
not a request. Each class records what came of it as Shots, like the others, so the table reads the same.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from hostile_attacks import CONFIGMAPS, MERGE_PATCH, Arena, Shot, attack, configmap


def _address(arena: Arena) -> tuple[str, int]:
    url = arena.http.base_url
    return str(url.host), int(url.port or 80)


async def _open(host: str, port: int, count: int, first: bytes) -> list[asyncio.StreamWriter]:
    """`count` connections, each sent `first`; opened 200 at a time (a listen backlog's worth)."""
    writers: list[asyncio.StreamWriter] = []

    async def one() -> None:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            return
        writer.write(first)
        writers.append(writer)

    for start in range(0, count, 200):
        await asyncio.gather(*(one() for _ in range(min(200, count - start))))
    return writers


def _record(arena: Arena, what: str, sent: float, status: int, message: str) -> None:
    arena.shots.append(Shot("CONN", what, sent, time.monotonic(), status, "", message))


@attack("slowloris-12000")
async def slowloris(arena: Arena) -> None:
    """12,000 connections that send half their headers, then a byte every 5 s (kube: each closed 32 s after it
    opened, Go's ReadHeaderTimeout, however it trickles); then a fresh GET on a new connection."""
    host, port = _address(arena)
    sent = time.monotonic()
    writers = await _open(host, port, 12_000, b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    live = set(writers)
    deadline = time.monotonic() + 60
    while live and time.monotonic() < deadline:
        await asyncio.sleep(5)
        for writer in list(live):
            try:
                writer.write(b"a")  # a byte more of the header: a trickle must not extend the timeout
                await writer.drain()
            except (ConnectionError, OSError):
                live.discard(writer)  # the server closed it
    closed = len(writers) - len(live)
    _record(arena, "half-sent headers", sent, 200 if closed == len(writers) else 0,
            f"{len(writers)} opened, {closed} closed by the server within {time.monotonic() - sent:.0f} s")
    for writer in writers:
        writer.close()
    await arena.fire("GET", "/healthz")


@attack("connections-18000")
async def connections_over_the_cap(arena: Arena) -> None:
    """18,000 idle connections at once, past the server's cap (its descriptor limit less a quarter): the
    surplus waits in the backlog instead of taking descriptors (kube-apiserver, with the system's
    descriptor limit, would accept them all); a kept-alive client goes on being served meanwhile."""
    host, port = _address(arena)
    await arena.fire("GET", "/healthz")  # the kept-alive connection, opened before the flood
    sent = time.monotonic()
    writers = await _open(host, port, 18_000, b"")
    _record(arena, "idle connections", sent, 200, f"{len(writers)} opened")
    for _ in range(20):
        await arena.fire("GET", "/api/v1/namespaces")
    for writer in writers:
        writer.close()


@attack("lists-500-concurrent")
async def concurrent_lists(arena: Arena) -> None:
    """500 LISTs at once of 3,000 ConfigMaps of 1 KiB (3 MiB each) (kube: 200, or 429 with Retry-After past
    --max-requests-inflight; API Priority and Fairness charges each such LIST 10 seats)."""
    namespace = arena.name("lists")
    await arena.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    sem = asyncio.Semaphore(16)
    data = {"k": "v" * 1000}

    async def create(i: int) -> None:
        async with sem:
            await arena.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=configmap(f"cm-{i}", data=data))
    await asyncio.gather(*(create(i) for i in range(3_000)))
    limits = httpx.Limits(max_connections=600, max_keepalive_connections=600)
    async with httpx.AsyncClient(base_url=arena.http.base_url, timeout=arena.http.timeout, limits=limits) as http:
        flood = Arena(http, shots=arena.shots)
        await asyncio.gather(*(flood.fire("GET", f"/api/v1/namespaces/{namespace}/configmaps") for _ in range(500)),
                             return_exceptions=True)


@attack("writes-600-held")
async def held_writes(arena: Arena) -> None:
    """600 POSTs that send their headers and never their body (kube: 200 hold a write seat until the 60 s
    request timeout and get 504 Timeout, nothing stored; the other 400 get 429 at once)."""
    host, port = _address(arena)
    request = (f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: 1000\r\n\r\n{").encode()
    sent = time.monotonic()
    readers: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for start in range(0, 600, 100):
        pairs = await asyncio.gather(*(asyncio.open_connection(host, port) for _ in range(min(100, 600 - start))))
        for reader, writer in pairs:
            writer.write(request)
            readers.append((reader, writer))

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 120)
            status = int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0
        except (TimeoutError, ConnectionError, ValueError, IndexError):
            status = 0
        arena.shots.append(Shot("POST", CONFIGMAPS, sent, time.monotonic(), status, "", ""))
        writer.close()
    await asyncio.gather(*(answer(r, w) for r, w in readers))


@attack("bad-numbers-in-parameters")
async def bad_numbers(arena: Arena) -> None:
    """LIST and WATCH with resourceVersion=², a 5,000-digit resourceVersion and timeoutSeconds, limit=٣,
    a forged continue, resourceVersionMatch without a resourceVersion (kube: 400 or 422, each)."""
    for params in ({"resourceVersion": "²"}, {"resourceVersion": "9" * 5000}, {"timeoutSeconds": "9" * 5000},
                   {"limit": "٣"}, {"continue": "bm90LWEtdG9rZW4"}, {"resourceVersionMatch": "Exact"},
                   {"watch": "true", "resourceVersion": "²"}, {"watch": "true", "timeoutSeconds": "-1" + "9" * 5000}):
        await arena.fire("GET", CONFIGMAPS, params=params)


@attack("watch-path-writes")
async def watch_path_writes(arena: Arena) -> None:
    """POST, PUT, PATCH and DELETE through /watch/ paths (kube: 405 each; a node's POST there used to
    create a Secret, the authorizer having read it as a watch)."""
    ns = arena.namespace
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stolen"},
                              "stringData": {"k": "v"}}
    await arena.fire("POST", f"/api/v1/watch/namespaces/{ns}/secrets", body=secret)
    await arena.fire("PUT", f"/api/v1/watch/namespaces/{ns}/secrets/stolen", body=secret)
    await arena.fire("PATCH", f"/api/v1/watch/namespaces/{ns}/secrets/stolen", body={"data": {}},
                     content_type=MERGE_PATCH)
    await arena.fire("DELETE", f"/api/v1/watch/namespaces/{ns}/secrets")
    await arena.fire("GET", f"/api/v1/namespaces/{ns}/secrets/stolen")  # 404: nothing was created


@attack("watch-cache-600x1mib")
async def watch_cache_memory(arena: Arena) -> None:
    """600 updates of a 1 MiB ConfigMap with a watcher reading them, then its deletion (kube's watch cache is
    bounded; kubelab's kept every event's object and line: +1.1 GB)."""
    name = arena.name("big")
    path = await arena.seed(configmap(name, data={"v": "0" * (1 << 20)}))
    events = 0

    async def watch() -> None:
        nonlocal events
        async with arena.http.stream("GET", CONFIGMAPS, params={"watch": "true", "fieldSelector":
                                                                 f"metadata.name={name}"}) as resp:
            async for _ in resp.aiter_lines():
                events += 1
    watcher = asyncio.create_task(watch())
    try:
        for i in range(600):
            await arena.fire("PUT", path, body=configmap(name, data={"v": str(i % 10) * (1 << 20)}))
        await arena.fire("DELETE", path)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


@attack("poisoned-names")
async def poisoned_names(arena: Arena) -> None:
    """A Service, a ConfigMap and a label whose names end in a newline, a port named "p\\n", a namespace
    "x\\n" (kube: 422 each; Python's `$` had let them through and a port name stopped every node's rules)."""
    ns = arena.namespace
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "evil\n"},
               "spec": {"ports": [{"port": 80}]}}
    await arena.fire("POST", f"/api/v1/namespaces/{ns}/services", body=service)
    await arena.fire("POST", f"/api/v1/namespaces/{ns}/services", body={
        **service, "metadata": {"name": "good"}, "spec": {"ports": [{"name": "p\n", "port": 80}]}})
    await arena.fire("POST", CONFIGMAPS, body=configmap("cm\n"))
    await arena.fire("POST", CONFIGMAPS, body={**configmap("labelled"), "metadata": {
        "name": "labelled", "labels": {"app": "web\n"}}})
    await arena.fire("POST", "/api/v1/namespaces", body={"metadata": {"name": "x\n"}})
