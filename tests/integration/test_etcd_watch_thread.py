"""The API server's etcd watches are read by threads (apiserver/etcdstream.py), against a real etcd: changes
that pile up while the event loop is busy reach the loop together, in etcd's order, rather than one response
per turn of the loop (during bench/up.py's burst that put the watch cache 2.3-2.7 s behind etcd); the
stream's end and its errors reach the reader as they would on gRPC's asyncio API."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import aetcd.rpc
import aetcd.utils
import grpc
import pytest

from apiserver.etcdstream import ThreadedWatch
from apiserver.storage import PROGRESS_REQUEST, Storage, Unavailable
from kubelab.etcd import Etcd

CHANGES = 50


@pytest.fixture
def channel(etcd: Etcd) -> Iterator[grpc.Channel]:
    url = urlparse(etcd.url)
    with grpc.insecure_channel(f"{url.hostname}:{url.port}") as chan:
        yield chan


def threaded_watch(channel: grpc.Channel, prefix: bytes) -> ThreadedWatch:
    create = aetcd.rpc.WatchCreateRequest(key=prefix, range_end=aetcd.utils.prefix_range_end(prefix))
    return ThreadedWatch(aetcd.rpc.WatchStub(channel).Watch, aetcd.rpc.WatchRequest(create_request=create),
                         PROGRESS_REQUEST, None)


async def test_changes_made_while_the_loop_is_busy_arrive_in_one_turn(channel: grpc.Channel) -> None:
    prefix = f"/registry/backlog-{secrets.token_hex(3)}/".encode()
    kv = aetcd.rpc.KVStub(channel)
    watch = threaded_watch(channel, prefix)
    try:
        responses = aiter(watch)
        assert (await anext(responses)).created
        # The loop is busy (these puts block it) while etcd sends the changes: the thread reads them anyway
        # (gRPC's asyncio API reads a response only when the loop's next turn asks for it).
        for i in range(CHANGES):
            kv.Put(aetcd.rpc.PutRequest(key=prefix + b"%d" % i, value=b"v"))
        def read_by_the_thread() -> int:
            return sum(len(response.events) for response in watch.waiting())

        deadline = time.monotonic() + 30
        while read_by_the_thread() < CHANGES and time.monotonic() < deadline:
            time.sleep(0.01)  # noqa: ASYNC251 - the loop is kept busy on purpose
        assert read_by_the_thread() == CHANGES

        turns = 0
        loop = asyncio.get_running_loop()

        def tick() -> None:
            nonlocal turns
            turns += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        keys: list[bytes] = []
        while len(keys) < CHANGES:
            keys += [event.kv.key for event in (await anext(responses)).events]
        assert keys == [prefix + b"%d" % i for i in range(CHANGES)]
        assert turns <= 2  # the wake-up the first response sent, then the reader's own turn
    finally:
        watch.cancel()


async def test_a_closed_channel_ends_a_storage_watch_with_unavailable(etcd: Etcd) -> None:
    """What a failover's backstop and Storage.close do to a watch: its reader hears etcd is unavailable
    (and watches again, on the connection then current)."""
    storage = Storage([etcd.url])
    prefix = f"/registry/closed-{secrets.token_hex(3)}/"
    try:
        revision = await storage.create(prefix + "a", {"metadata": {"name": "a"}})
        events = aiter(storage.watch(prefix, revision))
        first = await asyncio.wait_for(anext(events), 30)
        assert first.key == prefix + "a"
        assert "etcd-watch" in {thread.name for thread in threading.enumerate()}  # read by a thread
        await storage.close()
        with pytest.raises(Unavailable, match="connection to etcd was closed"):
            await asyncio.wait_for(anext(events), 30)
    finally:
        await storage.close()


async def test_cancelling_ends_the_thread(channel: grpc.Channel) -> None:
    watch = threaded_watch(channel, f"/registry/gone-{secrets.token_hex(3)}/".encode())
    assert (await anext(aiter(watch))).created
    watch.cancel()
    watch._thread.join(timeout=30)
    assert not watch._thread.is_alive()
