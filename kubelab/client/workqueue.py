"""WorkQueue: client-go's de-duplicating work queue with per-key exponential retry, for asyncio.

A key is in at most one of three places: waiting in the queue, being processed, or neither. Adding a
key that is waiting does nothing; adding a key that is being processed marks it dirty so it is queued
again once `done()` is called. So a burst of events for one Service costs one reconcile, and no two
workers ever reconcile the same key at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class WorkQueue:
    def __init__(self, name: str = "queue", *, base_delay: float = 0.005, max_delay: float = 30.0) -> None:
        self.name = name
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._shutdown = False
        # queuemetrics.QueueMetrics (workqueue_* metrics), set by the component that serves them.
        self.metrics: Any = None

    def __len__(self) -> int:
        return self._queue.qsize()

    def add(self, key: str) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if self.metrics is not None:  # client-go counts the add here, even for a key in processing
            self.metrics.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        if key in self._timers:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key)

        self._timers[key] = loop.call_later(delay, fire)

    def add_rate_limited(self, key: str) -> None:
        """Retry `key` after 5 ms, 10 ms, 20 ms ... capped at max_delay (client-go's item backoff)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if self.metrics is not None:
            self.metrics.retry()
        self.add_after(key, min(self._base_delay * 2**failures, self._max_delay))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def retries(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        if self.metrics is not None:
            self.metrics.get(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if self.metrics is not None:
            self.metrics.done(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def shutdown(self) -> None:
        self._shutdown = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def run_worker(self, reconcile: Callable[[str], Awaitable[None]]) -> None:
        """Process keys forever: success forgets the key's failures, an exception retries it later."""
        while True:
            await self._process(await self.get(), reconcile)

    async def run_per_key(self, reconcile: Callable[[str], Awaitable[None]], tasks: asyncio.TaskGroup) -> None:
        """Process every key at once, each in a task of its own in `tasks` (still one at a time per key):
        kubelet's pod workers, a goroutine per pod, where a fixed number of workers would make a node's
        later pods wait for the earlier ones' whole setup."""
        while True:
            key = await self.get()
            tasks.create_task(self._process(key, reconcile), name=f"{self.name}-{key}")

    async def _process(self, key: str, reconcile: Callable[[str], Awaitable[None]]) -> None:
        try:
            await reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reconcile failure must never kill the worker
            log.warning("%s: reconciling %s failed (retry %d): %s", self.name, key,
                        self.retries(key) + 1, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            self.add_rate_limited(key)
        else:
            self.forget(key)
        finally:
            self.done(key)
