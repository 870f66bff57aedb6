"""How many objects each resource has: kube-apiserver's storage object count tracker, in small.

API Priority and Fairness charges a LIST seats by the objects it will go through (one seat per 100,
at most 10); serving.py does the same in its in-flight limits, so that 500 concurrent LISTs of a large
resource cannot all run at once. The count is the watch cache's when the resource has a ready one (exact,
free), else etcd's, counted in the background at most once a minute (kube's tracker also counts every
minute); a resource never counted yet is unknown (None), and its LIST takes one seat.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kubelab.kinds import ResourceType

from ..cacher import Cacher
from ..storage import Storage, StorageError

log = logging.getLogger(__name__)

REFRESH_SECONDS = 60.0


class ObjectCounts:
    def __init__(self, storage: Storage, cacher: Cacher | None) -> None:
        self.storage = storage
        self.cacher = cacher
        self._known: dict[ResourceType, tuple[int, float]] = {}
        self._counting: dict[ResourceType, asyncio.Task[None]] = {}

    def get(self, rt: ResourceType) -> int | None:
        cache = self.cacher.caches.get(rt) if self.cacher is not None else None
        if cache is not None and cache.ready:
            return len(cache.store)
        known = self._known.get(rt)
        if (known is None or time.monotonic() - known[1] > REFRESH_SECONDS) and rt not in self._counting:
            self._counting[rt] = asyncio.create_task(self._count(rt), name=f"count-{rt.plural}")
        return known[0] if known is not None else None

    async def _count(self, rt: ResourceType) -> None:
        try:
            self._known[rt] = (await self.storage.count(f"/registry/{rt.plural}/"), time.monotonic())
        except StorageError as exc:
            log.debug("counting %s: %s", rt.plural, exc)
        finally:
            self._counting.pop(rt, None)

    async def stop(self) -> None:
        tasks = list(self._counting.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["ObjectCounts"]
