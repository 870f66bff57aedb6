"""How many objects each resource has: kube-apiserver's storage object count tracker, in small.

API Priority and Fairness charges a LIST seats by the objects it will go through (one seat per 100,
at most 10); flowcontrol.py does the same in its in-flight limits, so that 500 concurrent LISTs of a large
resource cannot all run at once. The count is the watch cache's when the resource has a ready one (exact,
free); else etcd's, counted at start-up and again at most once a minute (kube's tracker counts every
minute), kept current in between by this API server's own creates and deletes (`written`): counted only
once a minute, 3,000 ConfigMaps made after start-up were charged a seat per LIST, and 400 LISTs of 3 MiB
ran at once. A resource never counted yet is unknown (None), and its LIST takes one seat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from kubelab.kinds import ResourceType

from ..cacher import Cacher
from ..storage import Storage, StorageError

log = logging.getLogger(__name__)

REFRESH_SECONDS = 60.0


class ObjectCounts:
    def __init__(self, storage: Storage, cacher: Cacher | None) -> None:
        self.storage = storage
        self.cacher = cacher
        self._known: dict[str, tuple[int, float]] = {}  # plural -> (count, when etcd counted it)
        self._counting: dict[str, asyncio.Task[None]] = {}

    def prime(self, resources: Iterable[ResourceType]) -> None:
        """Count every resource now, in the background: the first burst of LISTs after start-up is charged
        its real seats, not one each."""
        for rt in resources:
            self._recount(rt.plural)

    def get(self, rt: ResourceType) -> int | None:
        cache = self.cacher.caches.get(rt) if self.cacher is not None else None
        if cache is not None and cache.ready:
            return len(cache.store)
        known = self._known.get(rt.plural)
        if known is None or time.monotonic() - known[1] > REFRESH_SECONDS:
            self._recount(rt.plural)
        return known[0] if known is not None else None

    def written(self, key: str, verb: str) -> None:
        """A create or delete this API server made (the registry's write hook): the count follows it."""
        if verb not in ("create", "delete"):
            return
        plural = key.split("/", 3)[2] if key.count("/") >= 3 else ""
        known = self._known.get(plural)
        if known is not None:
            self._known[plural] = (max(0, known[0] + (1 if verb == "create" else -1)), known[1])

    def _recount(self, plural: str) -> None:
        if plural not in self._counting:
            self._counting[plural] = asyncio.create_task(self._count(plural), name=f"count-{plural}")

    async def _count(self, plural: str) -> None:
        try:
            self._known[plural] = (await self.storage.count(f"/registry/{plural}/"), time.monotonic())
        except StorageError as exc:
            log.debug("counting %s: %s", plural, exc)
        finally:
            self._counting.pop(plural, None)

    async def stop(self) -> None:
        tasks = list(self._counting.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["ObjectCounts"]
