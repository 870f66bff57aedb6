"""The one shape of kubelab's queue-driven controllers, kube-controller-manager's: informer handlers put
keys on the controller's own rate-limited work queue, `reconcile(key)` brings one object to its desired
state from the caches, and `run(workers)` waits for the caches the controller reads, queues every existing
object once (client-go's WaitForCacheSync and the initial add of each informer's list) and runs the workers
(wait.Until(worker) per worker). A controller is constructed with everything it needs and registers its
own handlers; the manager only builds and runs it. The periodic controllers (node lifecycle, pod GC) are
loops, as kube's are, and the garbage collector keeps its graph builder."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from kubelab.client import Informer, WorkQueue


class QueueController(abc.ABC):
    name: ClassVar[str]
    queue: WorkQueue
    # Never more workers than this, whatever `run` is given: controllers whose writes must not race
    # (addresses handed out from one cache, accounts created once) sync one key at a time.
    max_workers: ClassVar[int | None] = None

    def caches(self) -> Sequence[Informer[Any]]:
        """The informers to wait for before the first key: those the manager does not sync itself."""
        return ()

    @abc.abstractmethod
    def initial_keys(self) -> Iterable[str]:
        """The keys queued once the caches are in: every object this controller owns."""

    @abc.abstractmethod
    async def reconcile(self, key: str) -> None: ...

    async def run(self, workers: int = 1) -> None:
        for informer in self.caches():
            await informer.wait_synced()
        for key in self.initial_keys():
            self.queue.add(key)
        count = workers if self.max_workers is None else min(workers, self.max_workers)
        async with asyncio.TaskGroup() as tg:
            for _ in range(max(1, count)):
                tg.create_task(self.queue.run_worker(self.reconcile), name=f"{self.name}-worker")
