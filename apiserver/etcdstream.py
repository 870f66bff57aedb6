"""An etcd Watch stream read by a thread of its own, its responses handed to the event loop in batches.

etcd sends a watcher that keeps up one WatchResponse per change. Read through gRPC's asyncio API, each
response waited for a turn of the API server's event loop, which during a burst also runs every request:
at ~900 pod changes a second (bench/up.py's 2,000 creates with their bindings) the watch cache fell 2.3-2.7 s
behind etcd, and with it every informer (a FailedScheduling event came 3 s after its pod's create). kube-
apiserver reads its etcd watches in goroutines of their own. Here a thread blocks on the stream (gRPC's
synchronous API, which waits without the GIL) and wakes the loop once for whatever arrived meanwhile, so the
loop takes a whole backlog in one turn however busy it is. The events are still decoded and dispatched on
the loop, in etcd's order.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

_END = object()


class ThreadedWatch:
    """One Watch call, made by `start` (the synchronous stub's Watch: it takes an iterator of requests and
    returns the call, an iterator of responses with cancel()): `create` is sent first, then `progress` for
    every item put on `progress_requests`. Iterate it on the loop that made it; `cancel()` ends the call and
    the thread. An error ends the iteration with that error (a grpc.RpcError from gRPC). The etcd messages
    are the caller's (apiserver/storage.py is the one module that speaks etcd's API)."""

    def __init__(self, start: Callable[[Iterator[Any]], Any], create: Any, progress: Any,
                 progress_requests: asyncio.Queue[None] | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._requests.put(create)
        self._progress = progress
        self._arrived: list[Any] = []
        self._lock = threading.Lock()
        self._batches: asyncio.Queue[list[Any]] = asyncio.Queue()
        self._call = start(self._outgoing())
        self._asking = asyncio.ensure_future(self._ask_progress(progress_requests)) \
            if progress_requests is not None else None
        self._thread = threading.Thread(target=self._read, name="etcd-watch", daemon=True)
        self._thread.start()

    def _outgoing(self) -> Iterator[Any]:
        """The requests, sent by gRPC's own thread: blocks until there is one, ends at cancel()."""
        while (request := self._requests.get()) is not _END:
            yield request

    async def _ask_progress(self, progress_requests: asyncio.Queue[None]) -> None:
        while True:
            await progress_requests.get()
            self._requests.put(self._progress)

    def _read(self) -> None:
        try:
            for response in self._call:
                self._hand_over(response)
        except Exception as exc:  # noqa: BLE001 - grpc.RpcError, or anything else: the reader hears of it
            self._hand_over(exc)
        else:
            self._hand_over(_END)

    def _hand_over(self, item: Any) -> None:
        with self._lock:
            first = not self._arrived
            self._arrived.append(item)
        if first:  # otherwise a wake-up is already on its way and will take this one too
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is reading any more
                self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            batch, self._arrived = self._arrived, []
        self._batches.put_nowait(batch)

    def waiting(self) -> list[Any]:
        """What the thread has read that the loop has not taken yet (a copy)."""
        with self._lock:
            return list(self._arrived)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[Any]:
        while True:
            for item in await self._batches.get():
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item

    def cancel(self) -> None:
        self._call.cancel()
        self._requests.put(_END)
        if self._asking is not None:
            self._asking.cancel()
